//! Landlock: what may be read, written and executed, which TCP connections and binds may be
//! made, and no signals to processes outside the sandbox.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use super::Coverage;
use crate::error::{Error, Result};
use crate::policy::expand::readable_beneath;
use crate::policy::profile::Profile;

/// The newest ABI whose rights are asked for; older kernels enforce what they know of the
/// refinements (truncation, device ioctls, scopes) and the coverage says which are missing.
const ABI_WANTED: ABI = ABI::V6;

pub(super) fn check(profile: &Profile) -> Result<Coverage> {
    // The baseline: files (ABI 1); and TCP (ABI 4) when the network is closed.
    let base = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create());
    if let Err(e) = base {
        return Err(Error::Unsupported {
            missing: format!(
                "Landlock, which confines files (Linux 5.13 or later, enabled at boot): {e}"
            ),
        });
    }
    if profile.network.is_confined() {
        let net = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::ConnectTcp | AccessNet::BindTcp)
            .and_then(|r| r.create());
        if let Err(e) = net {
            return Err(Error::Unsupported {
                missing: format!(
                    "Landlock's TCP rules (ABI 4, Linux 6.7), which close the network: {e}"
                ),
            });
        }
    }
    let mut missing = Vec::new();
    let has = |abi: ABI| {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.create())
            .is_ok()
    };
    if !has(ABI::V3) {
        missing.push("truncating files outside the grants (Landlock ABI 3)");
    }
    if !has(ABI::V5) {
        missing.push("device ioctls outside the grants (Landlock ABI 5)");
    }
    let scoped = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .and_then(|r| r.create())
        .is_ok();
    if !scoped {
        missing.push("signals and abstract sockets outside the sandbox (Landlock ABI 6)");
    }
    Ok(if missing.is_empty() {
        Coverage::Enforced
    } else {
        Coverage::Partly(missing)
    })
}

pub(super) fn restrict(profile: &Profile, ports: &[u16]) -> Result<Coverage> {
    let coverage = check(profile)?;
    let read = AccessFs::from_read(ABI_WANTED);
    let all = AccessFs::from_all(ABI_WANTED);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    if profile.network.is_confined() {
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::ConnectTcp | AccessNet::BindTcp)?;
    }
    let readable: Vec<_> = profile
        .read
        .iter()
        .flat_map(|root| readable_beneath(root, &profile.hidden))
        .collect();
    let writable: Vec<_> = profile
        .write
        .iter()
        .flat_map(|root| readable_beneath(root, &profile.hidden))
        .collect();
    let status = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .create()?
        .add_rules(path_beneath_rules(&readable, read))?
        .add_rules(path_beneath_rules(&writable, all))?
        .add_rules(ports.iter().map(|port| {
            Ok::<_, landlock::RulesetError>(NetPort::new(*port, AccessNet::ConnectTcp))
        }))?
        .restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(Error::Unsupported {
            missing: "Landlock (the kernel enforced none of the rules)".into(),
        });
    }
    Ok(coverage)
}
