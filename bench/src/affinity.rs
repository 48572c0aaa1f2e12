//! Where a pinned bench run puts its threads: the shards on the CPUs a node pins them to by
//! default ([`CpuPlacement::default_for_cores`]), and the bench's client (the producer, the
//! consumer and the embedded node's control plane, which share its runtime) on the CPUs no
//! shard uses. A load generator that time-shares a shard's core measures the scheduler, not
//! the engine: left unpinned, the client was woken on the shard's CPU now and then and waited
//! there up to 0.8 ms behind the shard's spin (perf/RESULTS.md, session 41).

use std::num::NonZeroUsize;

use anyhow::bail;
use nervix::runtime::CpuPlacement;

/// The CPUs of a pinned run's shards and of its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSplit {
    /// Shard `i` runs on `shard_cpus[i % len]`.
    pub shard_cpus: Vec<usize>,
    /// The CPUs left to the client; empty when the shards take every CPU.
    pub client_cpus: Vec<usize>,
}

/// The split for `shards` shards on this machine's available CPUs.
pub fn split(shards: NonZeroUsize) -> CpuSplit {
    split_for_cores(
        shards,
        std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
    )
}

/// The split for `shards` shards on CPUs `0..cores`.
pub fn split_for_cores(shards: NonZeroUsize, cores: NonZeroUsize) -> CpuSplit {
    let shard_cpus = match CpuPlacement::default_for_cores(shards, cores) {
        CpuPlacement::Pinned(cpus) => cpus,
        CpuPlacement::Unpinned => Vec::new(),
    };
    let client_cpus = (0..cores.get())
        .filter(|cpu| !shard_cpus.contains(cpu))
        .collect();
    CpuSplit {
        shard_cpus,
        client_cpus,
    }
}

/// Restricts the calling thread to `cpus` (threads it starts later inherit that).
// sched_setaffinity is libc FFI; the block states what it relies on.
#[allow(unsafe_code)]
pub fn pin_current_thread(cpus: &[usize]) -> anyhow::Result<()> {
    if cpus.is_empty() {
        bail!("no CPU to pin a thread to");
    }
    if let Some(cpu) = cpus.iter().find(|&&cpu| cpu >= libc::CPU_SETSIZE as usize) {
        bail!("CPU {cpu} is beyond what sched_setaffinity can address");
    }
    // SAFETY: `set` is a plain bit set owned by this frame; CPU_ZERO/CPU_SET only write inside
    // it (every cpu is below CPU_SETSIZE, checked above), and sched_setaffinity reads
    // `size_of::<cpu_set_t>()` bytes of it for the calling thread (pid 0).
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if result != 0 {
        bail!(
            "cannot pin a thread to CPUs {cpus:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{split_for_cores, CpuSplit};
    use std::num::NonZeroUsize;

    fn split(shards: usize, cores: usize) -> CpuSplit {
        split_for_cores(
            NonZeroUsize::new(shards).unwrap(),
            NonZeroUsize::new(cores).unwrap(),
        )
    }

    #[test]
    fn the_client_gets_the_cpus_no_shard_is_pinned_to() {
        assert_eq!(
            split(1, 2),
            CpuSplit {
                shard_cpus: vec![1],
                client_cpus: vec![0]
            }
        );
        assert_eq!(
            split(3, 8),
            CpuSplit {
                shard_cpus: vec![1, 2, 3],
                client_cpus: vec![0, 4, 5, 6, 7]
            }
        );
    }

    #[test]
    fn shards_on_every_cpu_leave_the_client_none() {
        assert_eq!(split(2, 2).client_cpus, Vec::<usize>::new());
        assert_eq!(split(4, 2).client_cpus, Vec::<usize>::new());
    }
}
