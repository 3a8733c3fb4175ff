//! Reading a child's stdout and stderr: newline-delimited lines with a length bound, where a
//! line over the bound is skipped and reading goes on.

use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder};

/// One line of a child's output, or the news that one was too long and was skipped.
#[derive(Debug)]
pub(crate) enum Line {
    Complete(bytes::Bytes),
    TooLong,
}

/// Newline-delimited lines of at most `max` bytes. An oversized line is an item, not an error:
/// `FramedRead` ends the stream after any decoder error, which would drop the stderr pipe (the
/// server's next write gets EPIPE) or make stdout look closed (taken for an exit). The inner
/// codec discards the rest of the long line by itself.
#[derive(Debug)]
pub(crate) struct Lines(AnyDelimiterCodec);

impl Lines {
    pub(crate) fn new(max: usize) -> Self {
        Lines(AnyDelimiterCodec::new_with_max_length(
            b"\n".to_vec(),
            b"\n".to_vec(),
            max,
        ))
    }

    fn item(
        decoded: Result<Option<bytes::Bytes>, AnyDelimiterCodecError>,
    ) -> std::io::Result<Option<Line>> {
        match decoded {
            Ok(line) => Ok(line.map(Line::Complete)),
            Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => Ok(Some(Line::TooLong)),
            Err(AnyDelimiterCodecError::Io(error)) => Err(error),
        }
    }
}

impl Decoder for Lines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut bytes::BytesMut) -> std::io::Result<Option<Line>> {
        Self::item(self.0.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut bytes::BytesMut) -> std::io::Result<Option<Line>> {
        Self::item(self.0.decode_eof(buf))
    }
}
