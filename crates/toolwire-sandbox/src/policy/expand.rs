//! From a grant and the hidden paths to the directories the kernel is told about. Landlock only
//! allows: to keep `~/.ssh` out of a grant of `/`, the grant becomes every entry of `/`
//! but the home directory, and every entry of the home directory but `.ssh`, and so on down.

use std::path::{Path, PathBuf};

/// The paths beneath `root` that a grant of `root` becomes when `hidden` must stay out of it:
/// `root` itself when nothing hidden is beneath it (or when it lies inside a hidden path: a grant
/// that names a path inside a secret is the person's own choice); otherwise its entries, each
/// expanded the same way, leaving out the hidden ones and any symbolic link that leads into one.
/// A missing `root` gives nothing.
pub fn readable_beneath(root: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    let hidden: Vec<PathBuf> = hidden
        .iter()
        .filter_map(|h| std::fs::canonicalize(h).ok())
        .collect();
    let Ok(root) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    if hidden.iter().any(|h| root.starts_with(h)) {
        return vec![root];
    }
    let mut out = Vec::new();
    expand(&root, &hidden, &mut out);
    out.sort();
    out.dedup();
    out
}

fn expand(dir: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        out.push(dir.to_owned());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for entry in entries {
        // Where the entry really is: a link to a secret is the secret.
        let Ok(real) = std::fs::canonicalize(&entry) else {
            continue;
        };
        if hidden.iter().any(|h| real.starts_with(h)) {
            continue;
        }
        if real != entry {
            // A link elsewhere: granted as its target, expanded the same way.
            if !hidden.iter().any(|h| h.starts_with(&real)) {
                out.push(real);
            } else {
                expand(&real, hidden, out);
            }
            continue;
        }
        if entry.is_dir() {
            expand(&entry, hidden, out);
        } else {
            out.push(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_leaves_out_the_hidden_paths_and_links_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for sub in [
            "home/.ssh",
            "home/.config/gh",
            "home/.config/app",
            "home/code",
            "etc",
        ] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("home/.bashrc"), "").unwrap();
        std::os::unix::fs::symlink(root.join("home/.ssh"), root.join("home/keys")).unwrap();
        std::os::unix::fs::symlink(root.join("etc"), root.join("home/etc-link")).unwrap();
        let hidden = [
            root.join("home/.ssh"),
            root.join("home/.config/gh"),
            root.join("absent"),
        ];
        let got = readable_beneath(&root, &hidden);
        let want: Vec<PathBuf> = ["etc", "home/.bashrc", "home/.config/app", "home/code"]
            .iter()
            .map(|p| root.join(p))
            .collect();
        assert_eq!(got, want);
        // Named inside a secret: the person's own choice.
        assert_eq!(
            readable_beneath(&root.join("home/.ssh"), &hidden),
            vec![root.join("home/.ssh")]
        );
        assert!(readable_beneath(&root.join("missing"), &hidden).is_empty());
        // Nothing hidden beneath: the grant as it is.
        assert_eq!(
            readable_beneath(&root.join("etc"), &hidden),
            vec![root.join("etc")]
        );
    }
}
