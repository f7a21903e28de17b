//! How node and benchmark-client processes sit on their machine: which core each runs on, and
//! whether their memory uses transparent huge pages.

/// Turns transparent huge pages off for this process, as a node process does when it starts.
///
/// A node allocates and frees versions and messages all the time, and the allocator marks its
/// arenas for huge pages: memory it gives back and touches again returns as a fresh 2 MiB page the
/// kernel must zero. On a 2-server loopback cluster that was 15-20% of all CPU (`clear_page_erms`),
/// and RAMP-F throughput swung by a quarter from run to run (150K against 200K txn/s with it off).
/// The embedded engine keeps huge pages: its large tables gain from fewer TLB misses.
pub fn disable_huge_pages() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes integer arguments and touches no memory of ours.
        let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Runs the calling thread, and the threads it starts from now on, only on core `n` modulo the
/// machine's cores.
///
/// A benchmark on loopback runs more busy event loops (nodes and client endpoints) than there are
/// cores; left to the scheduler, which loops share a core changed from run to run and so did
/// throughput (write-only RAMP-F on 2 nodes and 2 cores: 216-265K txn/s unpinned, 233-252K with
/// node `i` and client thread `i` on core `i`). [`crate::ramp::bench::launch::ProcessCluster`] places
/// node `i` on core `i` and [`crate::ramp::bench::run`] client thread `t` on core `t`.
pub fn pin_to_core(n: usize) -> Result<usize, String> {
    let cores = core_affinity::get_core_ids()
        .filter(|c| !c.is_empty())
        .ok_or("the cores this process may run on are unknown")?;
    let core = cores[n % cores.len()];
    if core_affinity::set_for_current(core) {
        Ok(core.id)
    } else {
        Err(format!("cannot pin a thread to core {}", core.id))
    }
}

/// Takes over the listening TCP socket this process inherited as file descriptor `fd` (a node
/// started by [`crate::ramp::bench::launch::ProcessCluster`] serves on the port its parent reserved, so
/// the port is never free between choosing it and serving on it). Call it once per descriptor.
pub fn inherited_listener(fd: i32) -> Result<std::net::TcpListener, String> {
    use std::os::fd::FromRawFd;
    let int_option = |level, name| {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt(2) writes at most `len` bytes into `value`, an int we own.
        let r = unsafe { libc::getsockopt(fd, level, name, (&raw mut value).cast(), &raw mut len) };
        (r == 0).then_some(value)
    };
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(format!("file descriptor {fd} is not open"));
    }
    match int_option(libc::SOL_SOCKET, libc::SO_TYPE) {
        None => return Err(format!("file descriptor {fd} is not a socket")),
        Some(t) if t != libc::SOCK_STREAM => {
            return Err(format!("file descriptor {fd} is not a TCP socket"));
        }
        Some(_) => {}
    }
    if int_option(libc::SOL_SOCKET, libc::SO_ACCEPTCONN) != Some(1) {
        return Err(format!("socket {fd} is not listening"));
    }
    // SAFETY: `fd` is an open listening socket that nothing else in this process owns (it was
    // inherited for this one use); F_SETFD keeps it from processes this one starts.
    let listener = unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        std::net::TcpListener::from_raw_fd(fd)
    };
    listener
        .local_addr()
        .map_err(|e| format!("socket {fd} has no address: {e}"))?;
    Ok(listener)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The line of `/proc/thread-self/status` that starts with `field`, without the field name.
    fn status(field: &str) -> String {
        let text = std::fs::read_to_string("/proc/thread-self/status").expect("procfs");
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .expect("the field is reported")
            .trim()
            .to_string()
    }

    #[test]
    fn a_pinned_thread_may_run_on_its_core_only_and_its_children_inherit_it() {
        std::thread::spawn(|| {
            let core = super::pin_to_core(7).expect("pinned");
            assert_eq!(status("Cpus_allowed_list:"), core.to_string());
            let child = std::thread::spawn(|| status("Cpus_allowed_list:"));
            assert_eq!(child.join().unwrap(), core.to_string());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn huge_pages_turn_off_for_the_whole_process() {
        super::disable_huge_pages().expect("prctl");
        assert_eq!(status("THP_enabled:"), "0");
    }

    #[test]
    fn only_an_open_listening_tcp_socket_is_taken_over() {
        use super::inherited_listener;
        use std::os::fd::{AsRawFd, IntoRawFd};
        assert_eq!(
            inherited_listener(i32::MAX).unwrap_err(),
            format!("file descriptor {} is not open", i32::MAX)
        );
        let file = std::fs::File::open("/proc/self/status").expect("procfs");
        let fd = file.as_raw_fd();
        assert_eq!(
            inherited_listener(fd).unwrap_err(),
            format!("file descriptor {fd} is not a socket")
        );
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
        let fd = udp.as_raw_fd();
        assert_eq!(
            inherited_listener(fd).unwrap_err(),
            format!("file descriptor {fd} is not a TCP socket")
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let client = std::net::TcpStream::connect(addr).expect("connect");
        let fd = client.as_raw_fd();
        assert_eq!(
            inherited_listener(fd).unwrap_err(),
            format!("socket {fd} is not listening")
        );
        let taken = inherited_listener(listener.into_raw_fd()).expect("a listening socket");
        assert_eq!(taken.local_addr().expect("address"), addr);
        drop(client);
        std::net::TcpStream::connect(addr).expect("it still accepts");
        // SAFETY: F_GETFD only reads the flags of a descriptor this test owns.
        let flags = unsafe { libc::fcntl(taken.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(
            flags & libc::FD_CLOEXEC,
            libc::FD_CLOEXEC,
            "not passed on further"
        );
    }
}
