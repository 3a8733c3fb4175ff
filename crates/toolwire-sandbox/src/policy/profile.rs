//! A server's grants: what it may read, what it may write, its network.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a sandboxed server may do. Everything not granted is refused: a read outside `read`
/// and `write`, a write outside `write`, and with [`Network::None`] any IP socket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Profile {
    /// Directories and files it may read and execute, with everything beneath them.
    pub read: Vec<PathBuf>,
    /// Directories and files it may read, write, create and remove, with everything beneath.
    pub write: Vec<PathBuf>,
    /// Paths that stay out of reach even beneath a granted directory, unless a grant names a
    /// path inside one of them itself (the person's secrets, X-03).
    pub hidden: Vec<PathBuf>,
    /// Its network.
    pub network: Network,
    /// Its own lasting directory, made when missing: writable, and its `XDG_DATA_HOME`
    /// (`data/`) and `XDG_STATE_HOME` (`state/`) unless its configuration sets them, so that
    /// what it keeps between runs has a place while the person's data stays out of reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
    /// The filtering proxy's socket, for [`Network::Hosts`] (set by the launch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<PathBuf>,
}

/// A server's network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Network {
    /// Any connection, as an unconfined process has.
    #[default]
    Any,
    /// No IP socket at all (TCP or UDP, v4 or v6); local Unix sockets still work.
    None,
    /// TCP connections to these ports only (on any address: Landlock's rules name ports), and
    /// no UDP, so no DNS either: names resolve from `/etc/hosts` only (`localhost`). For a
    /// server that talks to a local service (a database on 5432).
    Tcp(Vec<u16>),
    /// These `host:port` only, through a filtering proxy (`HTTPS_PROXY` and `HTTP_PROXY` point
    /// at it), from a network namespace of the server's own: a connection around the proxy
    /// finds nothing, and UDP is refused.
    Hosts(Vec<String>),
}

impl Network {
    /// Whether it is narrower than an open network (TCP confined by Landlock, UDP refused).
    pub fn is_confined(&self) -> bool {
        !matches!(self, Network::Any)
    }
}

impl Profile {
    /// A profile built step by step.
    pub fn builder() -> ProfileBuilder {
        ProfileBuilder(Profile::default())
    }

    /// This profile with `other`'s grants kept only where this one allows them too: the
    /// narrowing a project file may make (X-05). A path of `other` is kept when it lies beneath
    /// one of this profile's grants of the same kind; its network is kept when it is no wider.
    pub fn narrowed_by(&self, other: &Profile) -> Profile {
        let within = |path: &PathBuf, roots: &[PathBuf]| roots.iter().any(|r| path.starts_with(r));
        let write: Vec<PathBuf> = other
            .write
            .iter()
            .filter(|p| within(p, &self.write))
            .cloned()
            .collect();
        let read = other
            .read
            .iter()
            .filter(|p| within(p, &self.read) || within(p, &self.write))
            .cloned()
            .collect();
        let mut hidden = self.hidden.clone();
        hidden.extend(other.hidden.iter().cloned());
        Profile {
            read,
            write,
            hidden,
            network: if self.network.is_confined() {
                self.network.clone()
            } else {
                other.network.clone()
            },
            data: self.data.clone(),
            proxy: None,
        }
    }
}

/// Builds a [`Profile`].
#[derive(Debug)]
pub struct ProfileBuilder(Profile);

impl ProfileBuilder {
    /// May read (and execute) `path` and what is beneath it.
    pub fn read(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.read.push(path.into());
        self
    }

    /// May write `path` and what is beneath it.
    pub fn write(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.write.push(path.into());
        self
    }

    /// Keeps `path` out of reach beneath the grants.
    pub fn hide(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.hidden.push(path.into());
        self
    }

    /// Sets the network.
    pub fn network(mut self, network: Network) -> Self {
        self.0.network = network;
        self
    }

    /// The profile.
    pub fn build(self) -> Profile {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_narrowing_keeps_only_what_the_default_allows() {
        let default = Profile::builder()
            .read("/")
            .write("/home/p/.npm")
            .write("/work/repo")
            .build();
        let project = Profile::builder()
            .read("/work/repo/src")
            .write("/work/repo/out")
            .write("/home/p/.ssh")
            .network(Network::None)
            .build();
        let narrowed = default.narrowed_by(&project);
        assert_eq!(narrowed.write, vec![PathBuf::from("/work/repo/out")]);
        assert_eq!(narrowed.read, vec![PathBuf::from("/work/repo/src")]);
        assert_eq!(narrowed.network, Network::None);
        let closed = Profile::builder().network(Network::None).build();
        let wider = Profile::builder().network(Network::Any).build();
        assert_eq!(closed.narrowed_by(&wider).network, Network::None);
    }

    #[test]
    fn a_profile_reads_back_from_its_json() {
        let profile = Profile::builder()
            .read("/usr")
            .hide("/root/.ssh")
            .network(Network::None)
            .build();
        let text = serde_json::to_string(&profile).unwrap();
        assert!(text.contains(r#""network":"none""#), "{text}");
        assert_eq!(serde_json::from_str::<Profile>(&text).unwrap(), profile);
    }
}
