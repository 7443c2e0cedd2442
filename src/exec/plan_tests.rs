use super::*;

fn probe() -> Probe {
    Probe {
        kernel: Kernel::Linux,
        landlock_filesystem: true,
        landlock_tcp: true,
        landlock_signal_scope: true,
        namespaces: Namespaces::User,
        root: false,
        can_clear_bounding_set: false,
        pids_cgroup: false,
        seccomp: true,
        private_proc: true,
    }
}

#[test]
fn a_namespace_is_preferred_over_landlock_tcp_rules() {
    let plan = SandboxPlan::decide(&probe(), false);
    assert_eq!(plan.network, Network::Namespace);
    assert_eq!(plan.cleanup, Cleanup::PidNamespace);
    assert_eq!(plan.capabilities, Capabilities::None);
    assert_eq!(plan.process_limit, ProcessLimit::Rlimit);
    assert_eq!(plan.missing_requirements(), None);
}

/// A GitHub-hosted runner: no user namespace. UDP and DNS stayed open under Landlock's TCP
/// rules alone; a seccomp filter now refuses internet sockets, with the TCP rules behind it.
#[test]
fn without_namespaces_a_seccomp_filter_and_landlock_tcp_rules_and_a_subreaper_apply() {
    let plan = SandboxPlan::decide(
        &Probe {
            namespaces: Namespaces::None,
            ..probe()
        },
        false,
    );
    assert_eq!(plan.network, Network::SeccompAndLandlockTcp);
    assert_eq!(plan.missing_requirements(), None);
    let older_kernel = Probe {
        namespaces: Namespaces::None,
        landlock_tcp: false,
        ..probe()
    };
    assert_eq!(SandboxPlan::decide(&older_kernel, false).network, Network::Seccomp);
    let no_seccomp = Probe {
        namespaces: Namespaces::None,
        seccomp: false,
        ..probe()
    };
    assert_eq!(SandboxPlan::decide(&no_seccomp, false).network, Network::LandlockTcp);
    assert_eq!(plan.cleanup, Cleanup::Subreaper);
    assert_eq!(plan.capabilities, Capabilities::BoundingSetKept);
    assert_eq!(plan.process_limit, ProcessLimit::RlimitPerUser);
}

#[test]
fn allow_network_is_reported_as_allowed_whatever_the_kernel_has() {
    assert_eq!(SandboxPlan::decide(&probe(), true).network, Network::Allowed);
    assert_eq!(
        SandboxPlan::decide(&Probe::nothing(Kernel::Linux), true).network,
        Network::Allowed
    );
    assert_eq!(
        SandboxPlan::decide(&Probe::nothing(Kernel::Linux), true)
            .missing_requirements()
            .map(|m| m.contains("network")),
        Some(false)
    );
}

#[test]
fn root_limits_processes_with_a_cgroup_or_not_at_all() {
    let root = Probe {
        root: true,
        namespaces: Namespaces::Direct,
        ..probe()
    };
    assert_eq!(SandboxPlan::decide(&root, false).process_limit, ProcessLimit::None);
    let with_cgroup = Probe {
        pids_cgroup: true,
        ..root
    };
    assert_eq!(
        SandboxPlan::decide(&with_cgroup, false).process_limit,
        ProcessLimit::Cgroup
    );
}

#[test]
fn require_sandbox_names_what_is_missing() {
    let plan = SandboxPlan::decide(&Probe::nothing(Kernel::Linux), false);
    let missing = plan.missing_requirements().expect("nothing is available");
    assert!(missing.contains("filesystem confinement"), "{missing}");
    assert!(missing.contains("network isolation"), "{missing}");
}

#[test]
fn the_report_has_the_documented_shape() {
    let plan = SandboxPlan::decide(&probe(), false);
    let report = SandboxReport::new(&plan, &Limits::default());
    let value = serde_json::to_value(report).expect("serializes");
    assert_eq!(
        value,
        serde_json::json!({
            "filesystem": "landlock",
            "network": "namespace",
            "capabilities": "none",
            "limits": {
                "processes": 4096,
                "memory_mb": 8192,
                "file_size_mb": 8192,
                "cpu_seconds": 3600,
                "processes_enforced_by": "rlimit"
            },
            "cleanup": "pid-namespace",
            "proc": "private"
        })
    );
    assert_eq!(
        report.summary(),
        "filesystem landlock, network namespace, capabilities none, cleanup pid-namespace, proc private"
    );
}

/// What a macOS run gets, decided on any machine: whatever a probe claims, nothing of Linux's
/// is planned, and `--require-sandbox` says why it refuses.
#[test]
fn other_systems_plan_resource_limits_and_the_process_group_only() {
    let claims_everything = Probe {
        kernel: Kernel::Other,
        root: true,
        pids_cgroup: true,
        can_clear_bounding_set: true,
        ..probe()
    };
    let plan = SandboxPlan::decide(&claims_everything, false);
    assert_eq!(plan.kernel, Kernel::Other);
    assert_eq!(plan.filesystem, Filesystem::None);
    assert_eq!(plan.network, Network::None);
    assert_eq!(plan.namespaces, Namespaces::None);
    assert_eq!(plan.capabilities, Capabilities::Unchanged);
    assert_eq!(plan.process_limit, ProcessLimit::None);
    assert_eq!(plan.cleanup, Cleanup::ProcessGroup);
    assert!(!plan.signal_scope);
    assert_eq!(plan.proc, Proc::Host);
    let missing = plan.missing_requirements().expect("nothing is confined");
    assert!(
        missing.contains("filesystem confinement and network isolation"),
        "{missing}"
    );
    assert!(missing.contains("only on Linux"), "{missing}");

    let allowed = SandboxPlan::decide(&Probe::nothing(Kernel::Other), true);
    assert_eq!(allowed.network, Network::Allowed);
    let missing = allowed.missing_requirements().expect("still not confined");
    assert!(!missing.contains("network isolation"), "{missing}");

    let report = SandboxReport::new(&plan, &Limits::default());
    assert_eq!(
        report.summary(),
        "filesystem none, network none, capabilities unchanged, cleanup process-group, proc host"
    );
    let value = serde_json::to_value(report).expect("serializes");
    assert_eq!(value["limits"]["processes_enforced_by"], "none");
}

/// `docs/commands.md` shows exactly what a macOS run reports.
#[test]
fn the_documented_report_of_other_systems_is_the_one_made() {
    let docs = include_str!("../../docs/commands.md");
    let example = docs
        .split("## Other systems (macOS)")
        .nth(1)
        .and_then(|section| section.split("```json\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("a json block in the section");
    let documented: serde_json::Value = serde_json::from_str(example).expect("valid JSON");
    let plan = SandboxPlan::decide(&Probe::nothing(Kernel::Other), false);
    let made = serde_json::to_value(SandboxReport::new(&plan, &Limits::default())).expect("serializes");
    assert_eq!(made, documented);
}

/// Where the probe could not mount a `/proc` in a new mount namespace (or there are no
/// namespaces), commands keep the host's, and the report says so.
#[test]
fn without_a_mountable_proc_the_report_says_host() {
    let refused = SandboxPlan::decide(
        &Probe {
            private_proc: false,
            ..probe()
        },
        false,
    );
    assert_eq!(refused.proc, Proc::Host);
    assert_eq!(refused.cleanup, Cleanup::PidNamespace);
    assert_eq!(refused.missing_requirements(), None, "--require-sandbox is unchanged");
    let no_namespaces = SandboxPlan::decide(
        &Probe {
            namespaces: Namespaces::None,
            ..probe()
        },
        false,
    );
    assert_eq!(no_namespaces.proc, Proc::Host);
    assert_eq!(SandboxPlan::decide(&probe(), false).proc, Proc::Private);
    let report = SandboxReport::new(&refused, &Limits::default());
    assert!(report.summary().ends_with("proc host"), "{}", report.summary());
}
