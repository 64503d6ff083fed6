//! kubectl's error output as the CLI repeats it: without the client library's log lines, and
//! with the cause named where kubectl's words hide it.

/// kubectl's error without the client library's log lines (`E1207 08:13:58.605266 24278
/// memcache.go:265] ...`, one per retry of its discovery), which repeat what its last line
/// says (all of it when nothing else is left); a kubeconfig that names no cluster said as such.
pub fn explained(stderr: &str) -> String {
    let klog = |l: &str| {
        let b = l.as_bytes();
        b.len() > 6
            && matches!(b[0], b'E' | b'W' | b'I' | b'F')
            && b[1..5].iter().all(u8::is_ascii_digit)
            && b[5] == b' '
    };
    let kept: Vec<&str> = stderr
        .lines()
        .filter(|l| !klog(l) && !l.trim().is_empty())
        .collect();
    let message = if kept.is_empty() {
        stderr.trim().to_string()
    } else {
        kept.join("\n")
    };
    // kubectl with no cluster in its kubeconfig (empty, missing, or a context naming none)
    // falls back to http://localhost:8080, and says only that the connection was refused.
    if message.contains("localhost:8080") {
        return format!(
            "{message} (the kubeconfig names no cluster, so kubectl tried localhost:8080: check \
             --kubeconfig, $KUBECONFIG and --context)"
        );
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::log_lines_left_out(
        "E1207 08:13:58.605266   24278 memcache.go:265] \"Unhandled Error\" err=\"couldn't get current server API group list\"\n\
         E1207 08:13:58.606784   24278 memcache.go:265] \"Unhandled Error\"\n\
         The connection to the server 127.0.0.1:38813 was refused - did you specify the right host or port?\n",
        "The connection to the server 127.0.0.1:38813 was refused - did you specify the right host or port?"
    )]
    #[case::only_a_log_line("E1207 only a log line\n", "E1207 only a log line")]
    #[case::plain("Error from server (NotFound): x\n", "Error from server (NotFound): x")]
    #[case::no_cluster(
        "E1207 08:00:00.000000 1 memcache.go:265] couldn't get current server API group list\n\
         The connection to the server localhost:8080 was refused - did you specify the right host or port?\n",
        "The connection to the server localhost:8080 was refused - did you specify the right host or port? (the kubeconfig names no cluster, so kubectl tried localhost:8080: check --kubeconfig, $KUBECONFIG and --context)"
    )]
    fn kubectls_words(#[case] stderr: &str, #[case] said: &str) {
        assert_eq!(explained(stderr), said);
    }
}
