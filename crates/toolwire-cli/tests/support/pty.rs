//! Driving `toolwire` in a pseudo-terminal (expectrl): shared by the host tests.

use expectrl::{Eof, Session, WaitStatus};

/// Waits for `needle` and returns what came before it; if it never comes, fails with
/// everything the command wrote. Once the command has exited, expectrl's `expect` reports the
/// end while the last output is still unread: that output is read and searched too.
pub(crate) fn see(session: &mut Session, needle: &str) -> String {
    match session.expect(needle) {
        Ok(found) => String::from_utf8_lossy(found.before()).into_owned(),
        Err(expectrl::Error::Eof) => {
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(session, &mut rest);
            let rest = String::from_utf8_lossy(&rest).into_owned();
            match rest.find(needle) {
                Some(at) => rest[..at].to_owned(),
                None => panic!("{needle:?} not seen before the end: {rest:?}"),
            }
        }
        Err(error) => panic!("{needle:?} not seen: {error}"),
    }
}

/// Reads to the end and returns the exit status.
pub(crate) fn finish(mut session: Session) -> i32 {
    session.expect(Eof).expect("the command ends");
    match session.get_process().wait().expect("its status") {
        WaitStatus::Exited(_, code) => code,
        other => panic!("ended by {other:?}"),
    }
}
