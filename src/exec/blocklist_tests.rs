use super::*;

const REFUSED: &[&str] = &[
    // privilege escalation
    "sudo apt-get install foo",
    "cd src && sudo make install",
    "echo x | sudo tee /etc/hosts",
    "su -",
    "su root -c id",
    "doas ls",
    "pkexec id",
    "/usr/bin/sudo id",
    "env FOO=1 sudo id",
    "FOO=1 sudo id",
    "nohup sudo id &",
    "echo $(sudo id)",
    "echo `sudo id`",
    "sh -c 'sudo id'",
    "bash -lc \"sudo id\"",
    "(sudo id)",
    "true;sudo id",
    "\\sudo id",
    // power
    "shutdown -h now",
    "reboot",
    "poweroff",
    "halt",
    "init 0",
    "init 6",
    "telinit 6",
    "systemctl poweroff",
    "systemctl reboot",
    "systemctl --force reboot",
    "systemctl -i halt",
    "loginctl reboot",
    "make && reboot",
    "timeout 5 reboot",
    // formatting and partitioning
    "mkfs.ext4 /dev/sda1",
    "mkfs -t ext4 /dev/sdb",
    "mke2fs /dev/sdb1",
    "mkswap /dev/sdb2",
    "wipefs -a /dev/sda",
    "fdisk /dev/sda",
    "sfdisk /dev/sda < layout.txt",
    "parted /dev/nvme0n1 mklabel gpt",
    "parted -s /dev/sda rm 1",
    // raw device writes
    "dd if=/dev/zero of=/dev/sda bs=1M",
    "dd if=disk.img of=/dev/nvme0n1 status=progress",
    "echo x > /dev/sda",
    "cat disk.img >> /dev/nvme0n1",
    "cat disk.img > /dev/mmcblk0",
    "cat disk.img >/dev/sdb1",
    "echo x | tee /dev/sda",
    "shred -n 1 /dev/sda",
    "cp disk.img /dev/sdc",
    // recursive deletion of / and home
    "rm -rf /",
    "rm -fr /",
    "rm -r -f /",
    "rm -Rf /",
    "rm -rfv /",
    "rm -r /",
    "rm --recursive --force /",
    "rm -rf /*",
    "rm -rf //",
    "rm -rf /.",
    "rm -rf /..",
    "rm -rf \"/\"",
    "rm -rf '/'",
    "rm -rf -- /",
    "rm -rf ~",
    "rm -rf ~/",
    "rm -rf ~/*",
    "rm -rf $HOME",
    "rm -rf $HOME/",
    "rm -rf \"$HOME\"",
    "rm -rf ${HOME}",
    "rm -rf --no-preserve-root /",
    "rm --no-preserve-root -rf /",
    "rm -rf / --no-preserve-root",
    "rm -rf target /",
    "cd /tmp; rm -rf /",
    "cargo build && rm -rf / ",
    "/bin/rm -rf /",
    "sh -c 'rm -rf /'",
    "rm -rf /usr",
    "rm -rf /etc/",
    "rm -rf /home",
    "find . -name x | xargs rm -rf /",
    "cd x && rm -rf target && rm -rf ~",
    "rm -rf target; rm -rf /",
    // chmod on system paths
    "chmod -R 777 /",
    "chmod 777 /",
    "chmod 777 /etc",
    "chmod -R 777 /usr",
    "chmod -R 755 /",
    "chmod 666 /etc/passwd",
    "chmod -R a+rwx /",
    "chmod o+w /bin",
    "chmod a=rwx /usr/bin/env",
    "chmod 0777 /etc/shadow",
    "chmod +w /etc/sudoers",
    "chmod 777 /etc; ls",
    "chown -R nobody /",
    "chgrp -R users /usr",
    // fork bombs
    ":(){ :|:& };:",
    ":(){ :|: & };:",
    "bomb() { bomb | bomb & }; bomb",
    "function f { f|f& }; f",
];

const ALLOWED: &[&str] = &[
    "rm -rf target",
    "rm -rf ./build",
    "rm -rf target/ && cargo build",
    "rm -rf /tmp/upkeep-test",
    "rm -f /tmp/x",
    "rm -rf \"$HOME/.cache/upkeep\"",
    "rm -rf ~/.cache/upkeep",
    "rm /",
    "cargo test",
    "cargo build --release",
    "cargo run -- --halt",
    "grep -r sudo docs/",
    "grep -rn 'rm -rf /' scripts/",
    "grep -c reboot log.txt",
    "git commit -m \"halt on first error\"",
    "git log --format=%su",
    "echo reboot",
    "./halting_problem --init 0",
    "sudoku --help",
    "man su",
    "ls /dev/null",
    "cargo test > /dev/null 2>&1",
    "cargo test &> /dev/null",
    "make 2>/dev/null",
    "echo hi >/dev/stderr",
    "dd if=/dev/zero of=/dev/null count=1",
    "dd if=/dev/urandom of=./blob bs=1k count=1",
    "head -c 100 /dev/urandom | base64",
    "echo x | tee /dev/stderr",
    "cp /dev/null empty.txt",
    "chmod +x script.sh",
    "chmod -R 755 target",
    "chmod -R u+w .",
    "chmod 644 /tmp/x",
    "chmod 755 /usr/local/bin/tool",
    "chmod -w /etc/hosts",
    "chown -R me ./target",
    "systemctl status nginx",
    "find . -name '*.rs' | xargs grep unwrap",
    "cat /etc/os-release",
    "make install DESTDIR=./out",
    "fdisk --help",
    "parted --version",
    "git diff | head -n 50",
    "f() { echo hi; }; f",
    "rm -rf node_modules",
    "rm -rf \"$HOME\"/.cache/pip",
    "ls -la ~",
    "cd ~ && ls",
    "echo 'sudo is documented in README'",
    "python3 -c 'print(1)'",
    "cargo test -- --test-threads=1",
    "git push origin HEAD",
];

#[test]
fn refuses_catastrophic_commands() {
    let missed: Vec<&str> = REFUSED
        .iter()
        .copied()
        .filter(|command| check(command).is_ok())
        .collect();
    assert!(missed.is_empty(), "not refused: {missed:#?}");
}

#[test]
fn allows_ordinary_commands() {
    let refused: Vec<(&str, String)> = ALLOWED
        .iter()
        .filter_map(|command| Some((*command, check(command).err()?)))
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
}

#[test]
fn refusals_say_why() {
    for (command, reason) in [
        ("sudo id", "privilege escalation"),
        ("reboot", "rebooting"),
        ("mkfs.ext4 /dev/sda1", "formatting"),
        ("fdisk /dev/sda", "partitioning"),
        ("dd if=x of=/dev/sda", "raw device /dev/sda"),
        ("rm -rf /", "recursive deletion of /"),
        ("rm -rf --no-preserve-root /", "--no-preserve-root"),
        ("chmod 777 /etc", "writable by everyone"),
        (":(){ :|:& };:", "fork bomb"),
    ] {
        let message = check(command).err().unwrap_or_default();
        assert!(message.contains(reason), "{command}: {message}");
        assert!(message.starts_with("refused: "), "{command}: {message}");
    }
}

#[test]
fn guard_compiles() {
    assert!(GUARD.is_ok(), "{:?}", GUARD.as_ref().err());
}

#[test]
fn words_follow_shell_quoting() {
    assert_eq!(
        words(r#"-rf "a b" 'c d' e\ f "$HOME" ''"#),
        ["-rf", "a b", "c d", "e f", "$HOME", ""]
    );
}

#[test]
fn paths_normalize() {
    for (path, normalized) in [
        ("/", "/"),
        ("//", "/"),
        ("/*", "/"),
        ("/.", "/"),
        ("/../..", "/"),
        ("/usr/", "/usr"),
        ("/usr//*", "/usr"),
        ("${HOME}/", "$HOME"),
        ("~/*", "~"),
        ("target/", "target"),
    ] {
        assert_eq!(normalize(path), normalized, "{path}");
    }
}

#[test]
fn chmod_modes() {
    for mode in [
        "777", "0777", "666", "1777", "o+w", "a+rwx", "+w", "a=rwx", "u+x,o+w", "go+w-x",
    ] {
        assert!(grants_write_to_others(mode), "{mode}");
    }
    for mode in ["755", "644", "0700", "u+w", "g+w", "o-w", "-w", "+x", "a-w", "o=r"] {
        assert!(!grants_write_to_others(mode), "{mode}");
    }
}
