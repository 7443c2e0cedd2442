use std::io::Write;
use std::net::{TcpListener, TcpStream};

use super::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn skip(reason: &str) {
    let _ = writeln!(io::stderr(), "SKIP: {reason}");
}

/// Landlock restricts only the calling thread and what it starts, so a scratch thread can be
/// confined and start a shell without touching the rest of the test process.
#[test]
fn confined_commands_write_only_inside_the_writable_directories() -> TestResult {
    if !landlock_support().filesystem {
        skip("this kernel does not enforce Landlock");
        return Ok(());
    }
    let root = tempfile::tempdir()?;
    let inside = root.path().join("inside");
    let outside = root.path().join("outside");
    std::fs::create_dir(&inside)?;
    std::fs::create_dir(&outside)?;
    std::fs::write(outside.join("existing"), "keep")?;

    let rules = LandlockRules {
        writable: Some(vec![inside.clone()]),
        // The system to run `sh`, and `outside` to read, which writing must not follow.
        readable: crate::exec::readable::readable_paths(std::slice::from_ref(&outside)),
        deny_tcp: false,
    };
    let script = format!(
        "echo hi > '{inside}/x'; echo inside=$?; \
         echo hi > '{outside}/y'; echo outside=$?; \
         echo gone > '{outside}/existing'; echo overwrite=$?; \
         rm -f '{outside}/existing'; echo remove=$?; \
         mkdir '{outside}/d'; echo mkdir=$?; \
         echo hi > /dev/null; echo devnull=$?; \
         cat '{outside}/existing' > /dev/null; echo read=$?",
        inside = inside.display(),
        outside = outside.display(),
    );
    let output = std::thread::spawn(move || -> Result<std::process::Output, String> {
        restrict_current_thread(&rules)?;
        Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .map_err(|error| error.to_string())
    })
    .join()
    .map_err(|_| "confined thread panicked")??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Each step printed `name=status`; only the status's zero-ness is portable across shells.
    let status_of = |name: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_owned)
    };
    for (step, allowed) in [
        ("inside", true),
        ("outside", false),
        ("overwrite", false),
        ("remove", false),
        ("mkdir", false),
        ("devnull", true),
        ("read", true),
    ] {
        let status = status_of(step);
        assert_eq!(
            status.as_deref() == Some("0"),
            allowed,
            "{step}: status {status:?}; output: {stdout}"
        );
    }
    assert_eq!(std::fs::read_to_string(inside.join("x"))?, "hi\n");
    assert!(!outside.join("y").exists());
    assert!(!outside.join("d").exists());
    assert_eq!(std::fs::read_to_string(outside.join("existing"))?, "keep");
    Ok(())
}

#[test]
fn missing_writable_directory_is_an_error_not_an_escape() {
    if !landlock_support().filesystem {
        skip("this kernel does not enforce Landlock");
        return;
    }
    let rules = LandlockRules {
        writable: Some(vec![PathBuf::from("/nonexistent/upkeep/sandbox/dir")]),
        readable: Vec::new(),
        deny_tcp: false,
    };
    let result = std::thread::spawn(move || restrict_current_thread(&rules)).join();
    assert!(matches!(result, Ok(Err(_))), "{result:?}");
}

/// The fallback where no network namespace can be made: TCP connect and bind are denied, to
/// loopback too.
#[test]
fn landlock_tcp_rules_deny_connect_and_bind() -> TestResult {
    if !landlock_support().tcp {
        skip("this kernel has no Landlock network rules (ABI 4, Linux 6.7)");
        return Ok(());
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    // Unconfined, the connection works: the denial below is Landlock's doing.
    TcpStream::connect(address)?;
    let (connect, bind) = std::thread::spawn(move || -> Result<(bool, bool), String> {
        restrict_current_thread(&LandlockRules {
            writable: None,
            readable: Vec::new(),
            deny_tcp: true,
        })?;
        Ok((
            TcpStream::connect(address).is_ok(),
            TcpListener::bind("127.0.0.1:0").is_ok(),
        ))
    })
    .join()
    .map_err(|_| "confined thread panicked")??;
    assert!(!connect, "connect was allowed");
    assert!(!bind, "bind was allowed");
    Ok(())
}

#[test]
fn capabilities_are_cleared_in_this_thread() -> TestResult {
    let expected = if caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SETPCAP)? {
        Capabilities::None
    } else {
        Capabilities::BoundingSetKept
    };
    let (effective, bounding) = std::thread::spawn(move || -> Result<(usize, usize), String> {
        drop_capabilities(expected)?;
        let read = |set| {
            caps::read(None, set)
                .map(|set| set.len())
                .map_err(|error| error.to_string())
        };
        Ok((read(caps::CapSet::Effective)?, read(caps::CapSet::Bounding)?))
    })
    .join()
    .map_err(|_| "thread panicked")??;
    assert_eq!(effective, 0);
    if expected == Capabilities::None {
        assert_eq!(bounding, 0);
    }
    Ok(())
}

#[test]
fn this_user_has_at_least_this_process() {
    assert!(processes_of_this_user() >= 1);
}
