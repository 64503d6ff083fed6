//! What the end-to-end tests share: the binary run as a person runs it, from the crate's
//! directory, and what it answered.

use std::io::Write;
use std::process::{Command, Stdio};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `capi-rollout-check ARGS` with `stdin` on its standard input (none: an empty one).
pub fn run(args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_capi-rollout-check"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().expect("exited"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}
