//! seccomp: the system calls a server never needs and that reach past Landlock: tracing or
//! reading other processes, loading kernel code, mounting, and with a closed network any IP
//! socket, UDP included, which Landlock does not cover on this ABI.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::error::Result;
use crate::policy::profile::{Network, Profile};

/// Refused with `EPERM`, whatever the profile: another process's memory and tracing, kernel
/// modules and BPF, mounts and namespaces' roots, the kernel keyring, and io_uring (whose
/// operations would go around the socket rule below).
const ALWAYS_REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kexec_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
];

fn arch() -> Result<TargetArch> {
    Ok(std::env::consts::ARCH.try_into()?)
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch()?,
    )?;
    Ok(filter.try_into()?)
}

/// socket() of `domain` and, when given, of `kind` (the type without its flags).
fn socket_rule(domain: libc::c_int, kind: Option<libc::c_int>) -> Result<SeccompRule> {
    let mut conditions = vec![SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        domain as u64,
    )?];
    if let Some(kind) = kind {
        // SOCK_NONBLOCK and SOCK_CLOEXEC ride in the same argument: compare the type's bits.
        conditions.push(SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(0xf),
            kind as u64,
        )?);
    }
    Ok(SeccompRule::new(conditions)?)
}

pub(super) fn restrict(profile: &Profile) -> Result<()> {
    let always: BTreeMap<i64, Vec<SeccompRule>> = ALWAYS_REFUSED
        .iter()
        .map(|&call| (call, Vec::new()))
        .collect();
    let mut programs = vec![compile(always, libc::EPERM)?];
    // socket(AF_INET or AF_INET6, …), refused as a permission, as a firewall would: every
    // kind with a closed network; with TCP ports granted, every kind but a stream (UDP, raw,
    // SCTP), which Landlock's rules do not cover on this ABI.
    let refused: &[Option<libc::c_int>] = match &profile.network {
        Network::None => &[None],
        Network::Tcp(_) | Network::Hosts(_) => &[
            Some(libc::SOCK_DGRAM),
            Some(libc::SOCK_RAW),
            Some(libc::SOCK_SEQPACKET),
        ],
        _ => &[],
    };
    if !refused.is_empty() {
        let mut socket_rules = Vec::new();
        for domain in [libc::AF_INET, libc::AF_INET6] {
            for kind in refused {
                socket_rules.push(socket_rule(domain, *kind)?);
            }
        }
        let rules = BTreeMap::from([(libc::SYS_socket, socket_rules)]);
        programs.push(compile(rules, libc::EACCES)?);
    }
    for program in &programs {
        seccompiler::apply_filter(program)?;
    }
    Ok(())
}
