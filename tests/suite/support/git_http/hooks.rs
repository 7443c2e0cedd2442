//! The hooks behind `GitHttpServer::reject_pushes_to`: an `update` hook refusing the listed refs
//! and hooks that defer to a repository's own, written atomically.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Environment variable carrying the refused refs (one per line) to the hook.
pub(super) const REJECT_ENV: &str = "GIT_HTTP_TEST_REJECT_REFS";

const UPDATE_HOOK: &str = r#"#!/bin/sh
# Written by GitHttpServer::reject_pushes_to (test support). Refuses updates of
# the refs listed one per line in $GIT_HTTP_TEST_REJECT_REFS, then defers to the
# repository's own update hook, if any.
refname=$1
set -f
old_ifs=$IFS
IFS='
'
for rejected in $GIT_HTTP_TEST_REJECT_REFS; do
    if [ "$rejected" = "$refname" ]; then
        echo "test git server: updates of $refname are refused" >&2
        exit 1
    fi
done
IFS=$old_ifs
own_hook="${GIT_DIR:-.}/hooks/update"
if [ -x "$own_hook" ]; then
    exec "$own_hook" "$@"
fi
exit 0
"#;

const FORWARDED_HOOKS: [&str; 3] = ["pre-receive", "post-receive", "post-update"];

fn forwarding_hook(name: &str) -> String {
    format!(
        "#!/bin/sh\n\
         # Written by GitHttpServer::reject_pushes_to (test support): defers to the\n\
         # repository's own {name} hook, if any.\n\
         own_hook=\"${{GIT_DIR:-.}}/hooks/{name}\"\n\
         if [ -x \"$own_hook\" ]; then\n    exec \"$own_hook\" \"$@\"\nfi\nexit 0\n"
    )
}

pub(super) fn write_hooks(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    write_script(&dir.join("update"), UPDATE_HOOK)?;
    for name in FORWARDED_HOOKS {
        write_script(&dir.join(name), &forwarding_hook(name))?;
    }
    Ok(())
}

/// Writes an executable script atomically (temporary file, then rename), so a
/// hook that is running or about to run is never seen half-written.
fn write_script(path: &Path, contents: &str) -> io::Result<()> {
    if fs::read_to_string(path).is_ok_and(|existing| existing == contents) {
        return Ok(());
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, contents)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))?;
    }
    fs::rename(&tmp, path)
}
