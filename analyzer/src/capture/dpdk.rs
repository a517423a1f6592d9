//! DPDK capture: a small safe API over `dpdk-sys` (EAL, mbuf pool, ports with N RX queues
//! and no TX queue, RX burst into a fixed array, bulk free, port statistics, clean stop) and
//! the [`DpdkCapture`] source built on it; and, at the end, the few other operating-system
//! calls the probe makes (prefetch hints, huge pages for large tables, CPU placement).
//!
//! This module and `dpdk-sys` are the only places with `unsafe` code. Each block says why it
//! is sound; the invariants are: EAL is initialised once per process before any other DPDK
//! call ([`eal_init`]), a [`Port`] is only created from a valid port id and owns its device
//! until dropped, and an mbuf pointer returned by `rte_eth_rx_burst` is read only until the
//! burst is freed.

use super::nic_clock::{self, NicClock, Sample};
use super::port_plan::{self, Capabilities, PortPlan, Wanted};
use super::{Capture, Frame, Poll, SourceStats, BURST};
use anyhow::{anyhow, bail, Result};
use dpdk_sys as ffi;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A DPDK call that failed, with DPDK's own message for the error code.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}: {message}")]
pub struct DpdkError {
    pub what: String,
    pub code: i32,
    pub message: String,
}

fn strerror(code: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
    // string for any errno value; it is copied out at once.
    unsafe { CStr::from_ptr(ffi::rte_strerror(code)).to_string_lossy().into_owned() }
}

/// `ret` < 0 is a negated errno (the ethdev convention).
fn check(ret: c_int, what: impl FnOnce() -> String) -> std::result::Result<c_int, DpdkError> {
    if ret < 0 {
        Err(DpdkError { what: what(), code: -ret, message: strerror(-ret) })
    } else {
        Ok(ret)
    }
}

fn rte_errno() -> i32 {
    // SAFETY: reads the calling thread's rte_errno through the shim; no preconditions.
    unsafe { ffi::roceprobe_rte_errno() }
}

/// EAL can be initialised once per process (a second `rte_eal_init` fails even after
/// cleanup), so the first call's outcome is kept and returned to every later caller.
static EAL: Mutex<Option<std::result::Result<(), String>>> = Mutex::new(None);

/// What EAL printed while it initialised (kept to explain later failures, such as a vdev
/// whose file could not be opened, which EAL reports but does not fail on).
static EAL_LOG: Mutex<String> = Mutex::new(String::new());

/// Lines EAL prints on every healthy start; not worth an operator's attention.
const EAL_ROUTINE: [&str; 7] = [
    "EAL: Detected",
    "EAL: Selected IOVA",
    "EAL: Static memory layout",
    "EAL: Physical addresses are unavailable",
    "EAL: No available 1048576 kB hugepages",
    "TELEMETRY: No legacy callbacks",
    "EAL: VFIO support initialized",
];

/// Initialises the EAL with `args` (the arguments after `--`, without a program name).
///
/// EAL prints its usage text (on stdout) and diagnostics (on stderr) while it parses; both
/// are captured so that a failure becomes one line naming the problem; see [`eal_notes`].
/// The usage asked for (`-h`) is printed as EAL prints it.
pub fn eal_init(args: &[String]) -> Result<()> {
    let mut state = EAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = state.as_ref() {
        return r.clone().map_err(|e| anyhow!(e));
    }
    let mut owned: Vec<CString> = Vec::with_capacity(args.len() + 1);
    owned.push(CString::new("roceprobe").unwrap());
    for a in args {
        owned.push(CString::new(a.as_str()).map_err(|_| anyhow!("EAL argument {a:?} contains a NUL byte"))?);
    }
    // EAL's own informational lines (its multi-process socket's path, say, printed after
    // start-up) are left out unless the operator sets EAL's log levels: its notices,
    // warnings and errors stay.
    if !args.iter().any(|a| a.starts_with("--log-level")) {
        owned.push(CString::new("--log-level=lib.eal:notice").unwrap());
    }
    let mut argv: Vec<*mut c_char> = owned.iter().map(|s| s.as_ptr() as *mut c_char).collect();
    // Asked for its usage (`-h`, `--help`), EAL prints it and ends the process: left on the
    // terminal, not captured (the operator would see nothing).
    let asks_usage = args.iter().any(|a| a == "-h" || a == "--help");
    let captured = if asks_usage { None } else { OutputCapture::start() };
    // SAFETY: argv points at NUL-terminated strings that outlive the call (EAL keeps
    // pointers into argv for the process lifetime: `owned` is leaked below on success).
    let ret = unsafe { ffi::rte_eal_init(argv.len() as c_int, argv.as_mut_ptr()) };
    let errno = rte_errno();
    let text = captured.map(OutputCapture::finish).unwrap_or_default();
    let result = if ret < 0 {
        Err(eal_failure_line(&text, errno))
    } else {
        std::mem::forget(owned);
        std::mem::forget(argv);
        Ok(())
    };
    *EAL_LOG.lock().unwrap_or_else(|e| e.into_inner()) = text;
    *state = Some(result.clone());
    result.map_err(|e| anyhow!(e))
}

/// What EAL said at start-up beyond its routine lines, for the operator once capture has
/// started (a failed start reports [`eal_diagnostic`] instead).
pub fn eal_notes() -> Vec<String> {
    let log = EAL_LOG.lock().unwrap_or_else(|e| e.into_inner());
    log.lines()
        .filter(|l| !l.trim().is_empty() && !EAL_ROUTINE.iter().any(|r| l.starts_with(r)))
        .map(str::to_owned)
        .collect()
}

/// The line of EAL's start-up output that best explains a failure, if any.
pub fn eal_diagnostic() -> Option<String> {
    let log = EAL_LOG.lock().unwrap_or_else(|e| e.into_inner());
    diagnostic_line(&log)
}

fn diagnostic_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| !l.is_empty() && !EAL_ROUTINE.iter().any(|r| l.starts_with(r)))
        .collect();
    // getopt's own complaint names the bad option; then the first line saying what failed.
    let telling =
        ["unrecognized option", "invalid option", "requires an argument", "Couldn't", "Cannot", "cannot"];
    lines
        .iter()
        .find(|l| telling.iter().any(|t| l.contains(t)))
        .or_else(|| lines.iter().find(|l| l.contains("fail") || l.contains("rror") || l.contains("nvalid")))
        .or(lines.last())
        .map(|l| l.trim_start_matches("roceprobe: ").to_owned())
}

fn eal_failure_line(text: &str, errno: i32) -> String {
    let why = strerror(errno);
    match diagnostic_line(text) {
        // EAL looks for hugepages unless told not to; a first run on a machine without them
        // (or a test box) stops here, and DPDK's line does not say what to do.
        Some(d) if d.contains("hugepage") => format!(
            "DPDK EAL initialisation failed: {d} ({why}): reserve hugepages (docs/DEPLOYMENT.md, \"Hugepages\"), or run without them: --no-huge -m 1024 after --"
        ),
        Some(d) => format!("DPDK EAL initialisation failed: {d} ({why})"),
        None => format!("DPDK EAL initialisation failed: {why}"),
    }
}

/// Redirects fds 1 and 2 into an anonymous memory file until `finish`.
struct OutputCapture {
    saved: [c_int; 2],
    memfd: c_int,
}

impl OutputCapture {
    fn start() -> Option<Self> {
        // SAFETY: plain fd syscalls on descriptors this function owns; on any failure the
        // original descriptors are left in place.
        unsafe {
            let memfd = libc::memfd_create(c"roceprobe-eal-output".as_ptr(), 0);
            if memfd < 0 {
                return None;
            }
            libc::fflush(std::ptr::null_mut());
            let saved = [libc::dup(1), libc::dup(2)];
            if saved.iter().any(|&fd| fd < 0) || libc::dup2(memfd, 1) < 0 || libc::dup2(memfd, 2) < 0 {
                for fd in saved.into_iter().filter(|&fd| fd >= 0) {
                    libc::close(fd);
                }
                libc::close(memfd);
                return None;
            }
            Some(Self { saved, memfd })
        }
    }

    fn finish(self) -> String {
        let mut out = Vec::new();
        // SAFETY: restores fds 1 and 2 from the saved copies and reads the memfd this struct owns.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::dup2(self.saved[0], 1);
            libc::dup2(self.saved[1], 2);
            libc::close(self.saved[0]);
            libc::close(self.saved[1]);
            libc::lseek(self.memfd, 0, libc::SEEK_SET);
            let mut buf = [0u8; 4096];
            loop {
                let n = libc::read(self.memfd, buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n as usize]);
            }
            libc::close(self.memfd);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Releases EAL resources. Call once, after every port and pool is dropped.
pub fn eal_cleanup() {
    // SAFETY: rte_eal_cleanup is safe to call after init; callers drop DPDK objects first.
    unsafe {
        ffi::rte_eal_cleanup();
    }
}

/// The CPUs of EAL's lcores other than the main one (the cores `-l` gave the probe beyond
/// the capture thread's), for pinning workers.
pub fn eal_worker_cpus() -> Vec<usize> {
    let mut cpus = Vec::new();
    // SAFETY: lcore queries after EAL init; rte_get_next_lcore returns RTE_MAX_LCORE at the end.
    unsafe {
        let mut lcore = ffi::rte_get_next_lcore(u32::MAX, 1, 0);
        while lcore < ffi::RTE_MAX_LCORE {
            cpus.push(ffi::rte_lcore_to_cpu_id(lcore as i32) as usize);
            lcore = ffi::rte_get_next_lcore(lcore, 1, 0);
        }
    }
    cpus
}

/// The ports a capture takes: those given (`--port`), else every port EAL found.
pub fn ports_to_capture(given: &[u16]) -> Vec<u16> {
    if given.is_empty() {
        available_ports()
    } else {
        given.to_vec()
    }
}

/// The ids of the ethdev ports EAL found (NICs bound to DPDK, and vdevs).
pub fn available_ports() -> Vec<u16> {
    (0..ffi::RTE_MAX_ETHPORTS as u16)
        // SAFETY: validity check on any id; no preconditions beyond EAL init.
        .filter(|&id| unsafe { ffi::rte_eth_dev_is_valid_port(id) } == 1)
        .collect()
}

/// The mbufs DPDK keeps in each lcore's cache of the pool.
pub const MEMPOOL_CACHE: u32 = 256;
/// The smallest pool DPDK makes with that cache: one and a half times it.
pub const MEMPOOL_MIN: u32 = MEMPOOL_CACHE * 3 / 2;

/// An mbuf pool.
pub struct Mempool {
    ptr: NonNull<ffi::rte_mempool>,
}

// SAFETY: rte_mempool is designed for use from any lcore/thread (per-lcore caches are
// looked up by the calling thread).
unsafe impl Send for Mempool {}
unsafe impl Sync for Mempool {}

impl Mempool {
    /// `data_room`: bytes per mbuf for frame data, 0 for DPDK's default (2 KiB + headroom).
    /// At least [`MEMPOOL_MIN`] mbufs.
    pub fn create(name: &str, mbufs: u32, data_room: u16, socket: i32) -> Result<Self> {
        let cname = CString::new(name)?;
        // SAFETY: valid C string; EAL is initialised by the caller.
        let p = unsafe {
            ffi::rte_pktmbuf_pool_create(
                cname.as_ptr(),
                mbufs,
                MEMPOOL_CACHE,
                0,
                if data_room == 0 { ffi::roceprobe_mbuf_default_buf_size() } else { data_room },
                socket,
            )
        };
        NonNull::new(p).map(|ptr| Self { ptr }).ok_or_else(|| {
            let e = rte_errno();
            // Out of memory is EAL's memory, not the machine's: say what gives it more.
            let hint = if e == libc::ENOMEM {
                " (EAL's memory is too small for it: give EAL more with -m MB or --socket-mem, or more hugepages, or ask for fewer with --mbufs)"
            } else {
                ""
            };
            anyhow!(DpdkError {
                what: format!("creating mbuf pool of {mbufs}"),
                code: e,
                message: format!("{}{hint}", strerror(e)),
            })
        })
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: ports using the pool are stopped and closed before the pool is dropped
        // (DpdkCapture drops its ports first).
        unsafe { ffi::rte_mempool_free(self.ptr.as_ptr()) }
    }
}

/// Fills an RSS key with the repeating 0x6d5a pattern: Toeplitz hashing with it gives the same
/// hash for (a, b) and (b, a), so both directions between two hosts reach one queue.
fn symmetric_rss_key(key: &mut [u8]) {
    for (i, b) in key.iter_mut().enumerate() {
        *b = if i % 2 == 0 { 0x6d } else { 0x5a };
    }
}

/// What port `id`'s device can do, read before it is configured.
pub fn capabilities(id: u16) -> Result<Capabilities> {
    // SAFETY (whole block): `id` is checked with rte_eth_dev_is_valid_port first; the
    // out-structs are zeroed locals.
    unsafe {
        if ffi::rte_eth_dev_is_valid_port(id) != 1 {
            bail!("DPDK port {id} does not exist (EAL found ports {:?})", available_ports());
        }
        let mut info: ffi::rte_eth_dev_info = std::mem::zeroed();
        check(ffi::rte_eth_dev_info_get(id, &mut info), || format!("port {id}: reading device info"))?;
        let driver = if info.driver_name.is_null() {
            "unknown".to_owned()
        } else {
            CStr::from_ptr(info.driver_name).to_string_lossy().into_owned()
        };
        let mut ticks = 0u64;
        Ok(Capabilities {
            driver,
            flow_type_rss_offloads: info.flow_type_rss_offloads,
            rx_offload_capa: info.rx_offload_capa,
            max_rx_pktlen: info.max_rx_pktlen,
            min_mtu: info.min_mtu,
            max_mtu: info.max_mtu,
            max_rx_queues: info.max_rx_queues,
            hash_key_size: info.hash_key_size,
            reta_size: info.reta_size,
            read_clock: ffi::rte_eth_read_clock(id, &mut ticks) == 0,
        })
    }
}

/// Ethernet flow control on the probe's ports (`--flow-control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowControl {
    /// Turned off: a probe that falls behind drops (counted in imissed) rather than send
    /// PAUSE frames to the switch's mirror port.
    Off,
    /// Left as the driver set it.
    Keep,
}

/// A flow control mode's name.
fn fc_mode_name(mode: ffi::rte_eth_fc_mode) -> &'static str {
    match mode {
        ffi::rte_eth_fc_mode_RTE_ETH_FC_NONE => "off",
        ffi::rte_eth_fc_mode_RTE_ETH_FC_RX_PAUSE => "rx pause",
        ffi::rte_eth_fc_mode_RTE_ETH_FC_TX_PAUSE => "tx pause",
        ffi::rte_eth_fc_mode_RTE_ETH_FC_FULL => "rx+tx pause",
        _ => "unknown",
    }
}

/// A started ethdev port with `rx_queues` RX queues and no TX queue.
pub struct Port {
    id: u16,
    rx_queues: u16,
    /// Descriptors of each RX queue: the most frames its ring holds.
    rx_desc: u16,
    /// A net_pcap vdev's file ends at a damaged record or inside one (found before the
    /// run): net_pcap reads it up to there, and the summary says the run was cut short.
    cut_short: bool,
    name: String,
    /// The NIC stamps received frames with its clock (RX timestamp offload enabled).
    timestamps: bool,
    /// The line that tells how the port was set up.
    setup: String,
}

impl Port {
    pub fn start(
        id: u16,
        caps: &Capabilities,
        plan: &PortPlan,
        rx_queues: u16,
        pool: &Mempool,
        rx_desc: u16,
        flow_control: FlowControl,
    ) -> Result<Self> {
        let name = caps.driver.clone();
        // SAFETY (whole block): `id` was checked by `capabilities`; every struct passed by
        // pointer is a live, zero-initialised local.
        unsafe {
            let mut conf: ffi::rte_eth_conf = std::mem::zeroed();
            conf.rxmode.mtu = u32::from(plan.mtu);
            if plan.scatter {
                conf.rxmode.offloads |= port_plan::flags::RX_OFFLOAD_SCATTER;
            }
            if plan.timestamps {
                conf.rxmode.offloads |= ffi::roceprobe_rx_offload_timestamp();
            }
            // Several queues: RSS on the IP pair alone (RoCEv2's UDP source port differs per
            // QP and per direction), with a symmetric key so both directions hash alike.
            let hf = plan.rss_hf;
            let mut key = [0u8; 64];
            if rx_queues > 1 && hf != 0 {
                let len = usize::from(caps.hash_key_size).clamp(40, key.len());
                symmetric_rss_key(&mut key[..len]);
                conf.rxmode.mq_mode = ffi::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
                conf.rx_adv_conf.rss_conf.rss_hf = hf;
                conf.rx_adv_conf.rss_conf.rss_key = key.as_mut_ptr();
                conf.rx_adv_conf.rss_conf.rss_key_len = len as u8;
            }
            check(ffi::rte_eth_dev_configure(id, rx_queues, 0, &conf), || {
                format!("port {id} ({name}): configuring {rx_queues} RX queues, MTU {}", plan.mtu)
            })?;
            let mut nb_rxd = rx_desc;
            let mut nb_txd = 0u16;
            check(ffi::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut nb_rxd, &mut nb_txd), || {
                format!("port {id} ({name}): adjusting descriptor counts")
            })?;
            let socket = ffi::rte_eth_dev_socket_id(id);
            let socket = if socket < 0 { 0 } else { socket as u32 };
            for q in 0..rx_queues {
                check(
                    ffi::rte_eth_rx_queue_setup(id, q, nb_rxd, socket, std::ptr::null(), pool.ptr.as_ptr()),
                    || format!("port {id} ({name}): setting up RX queue {q}"),
                )?;
            }
            // A mirror port must accept frames for every MAC; some vdevs cannot and need not.
            let _ = ffi::rte_eth_promiscuous_enable(id);
            check(ffi::rte_eth_dev_start(id), || format!("port {id} ({name}): starting"))?;
            if rx_queues > 1 && hf != 0 && caps.reta_size > 0 {
                // The same redirection table on every port (entry i -> queue i mod N), so a
                // host pair lands on the same queue index at every vantage.
                let mut reta: Vec<ffi::rte_eth_rss_reta_entry64> =
                    (0..usize::from(caps.reta_size).div_ceil(64)).map(|_| std::mem::zeroed()).collect();
                for (g, group) in reta.iter_mut().enumerate() {
                    group.mask = u64::MAX;
                    for (j, q) in group.reta.iter_mut().enumerate() {
                        *q = ((g * 64 + j) % usize::from(rx_queues)) as u16;
                    }
                }
                let ret = ffi::rte_eth_dev_rss_reta_update(id, reta.as_mut_ptr(), caps.reta_size);
                if ret != 0 {
                    // PMDs default to the same table; say so rather than refuse to run.
                    crate::note!(
                        "roceprobe: warning: port {id} ({name}) keeps its default RSS redirection table ({})",
                        strerror(-ret)
                    );
                }
            }
            // Flow control: what the port does now, turned off if asked and possible.
            let mut fc: ffi::rte_eth_fc_conf = std::mem::zeroed();
            let flow = match ffi::rte_eth_dev_flow_ctrl_get(id, &mut fc) {
                0 if fc.mode == ffi::rte_eth_fc_mode_RTE_ETH_FC_NONE => "off".to_owned(),
                0 if flow_control == FlowControl::Keep => format!("{} (kept)", fc_mode_name(fc.mode)),
                0 => {
                    let was = fc_mode_name(fc.mode);
                    fc.mode = ffi::rte_eth_fc_mode_RTE_ETH_FC_NONE;
                    match ffi::rte_eth_dev_flow_ctrl_set(id, &mut fc) {
                        0 => format!("off (was {was})"),
                        e => format!("{was} (the driver refused to turn it off: {})", strerror(-e)),
                    }
                }
                _ => "not reported by the driver".to_owned(),
            };
            let mut mtu = 0u16;
            let mtu = if ffi::rte_eth_dev_get_mtu(id, &mut mtu) == 0 { mtu } else { plan.mtu };
            let rss = if rx_queues > 1 && hf != 0 {
                format!("RSS {} (symmetric key)", port_plan::rss_names(hf))
            } else if rx_queues > 1 && name == "net_pcap" {
                // net_pcap cannot hash: a queue per rx_pcap file, as the files were split.
                "no RSS: a queue per rx_pcap file, each of which must hold whole IP pairs".to_owned()
            } else {
                "no RSS".to_owned()
            };
            let setup = format!(
                "roceprobe: port {id}: {name}, MTU {mtu} (frames up to {} bytes{}), {rx_queues} RX queue{}, {rss}, {}, flow control {flow}",
                plan.max_frame,
                if plan.scatter { ", scatter" } else { "" },
                if rx_queues == 1 { "" } else { "s" },
                plan.times,
            );
            Ok(Self {
                id,
                rx_queues,
                rx_desc: nb_rxd,
                cut_short: false,
                name,
                timestamps: plan.timestamps,
                setup,
            })
        }
    }

    /// How the port was set up, in one line.
    pub fn setup_line(&self) -> &str {
        &self.setup
    }

    pub fn id(&self) -> u16 {
        self.id
    }

    pub fn driver(&self) -> &str {
        &self.name
    }

    /// Receives up to `BURST` mbufs from `queue` into `bufs`; returns how many.
    #[inline]
    pub fn rx_burst(&self, queue: u16, bufs: &mut [*mut ffi::rte_mbuf; BURST]) -> usize {
        debug_assert!(queue < self.rx_queues);
        // SAFETY: the port is started and the queue was set up; bufs has room for BURST.
        usize::from(unsafe { ffi::rte_eth_rx_burst(self.id, queue, bufs.as_mut_ptr(), BURST as u16) })
    }

    pub fn stats(&self) -> SourceStats {
        // SAFETY: valid port id, zeroed out-struct.
        unsafe {
            let mut s: ffi::rte_eth_stats = std::mem::zeroed();
            if ffi::rte_eth_stats_get(self.id, &mut s) != 0 {
                return SourceStats { captured: true, ..Default::default() };
            }
            SourceStats {
                ipackets: s.ipackets,
                ibytes: s.ibytes,
                imissed: s.imissed,
                ierrors: s.ierrors,
                rx_nombuf: s.rx_nombuf,
                retimed: 0,
                cut_short: self.cut_short,
                captured: true,
            }
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // SAFETY: the port was started by Port::start and is stopped and closed once.
        unsafe {
            ffi::rte_eth_dev_stop(self.id);
            ffi::rte_eth_dev_close(self.id);
        }
    }
}

/// Frees a burst of mbufs in one call.
#[inline]
fn free_bulk(bufs: &mut [*mut ffi::rte_mbuf; BURST], n: usize) {
    // SAFETY: the first n pointers came from rte_eth_rx_burst and are not used afterwards.
    unsafe { ffi::rte_pktmbuf_free_bulk(bufs.as_mut_ptr(), n as u32) }
}

/// Converts TSC readings to Unix nanoseconds, anchored at start-up.
#[derive(Debug, Clone, Copy)]
struct TscClock {
    unix_ns0: u64,
    tsc0: u64,
    hz: u64,
}

impl TscClock {
    fn new() -> Self {
        // SAFETY: no preconditions after EAL init.
        let (tsc0, hz) = unsafe { (ffi::rte_get_tsc_cycles(), ffi::rte_get_tsc_hz()) };
        let unix_ns0 = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        Self { unix_ns0, tsc0, hz: hz.max(1) }
    }
    #[inline]
    fn now_ns(&self) -> u64 {
        // SAFETY: no preconditions.
        let tsc = unsafe { ffi::rte_get_tsc_cycles() };
        let d = u128::from(tsc.wrapping_sub(self.tsc0)) * 1_000_000_000 / u128::from(self.hz);
        self.unix_ns0 + d as u64
    }
}

/// When a live capture stops by itself (besides a signal).
#[derive(Debug, Clone, Copy, Default)]
pub struct StopWhen {
    /// Stop after this long with no frame received on any port (replaying a vdev file).
    pub idle: Option<Duration>,
    /// Stop after this long in all.
    pub duration: Option<Duration>,
}

/// What a port's mbuf RX timestamps are made of.
#[derive(Debug, Clone, Copy)]
enum NicTime {
    /// None usable: frames are timed with the TSC at RX.
    Tsc,
    /// Nanoseconds since the epoch per unit (net_pcap replays its file's times in µs).
    Unit(u64),
    /// Device-clock ticks, mapped by a calibration against the TSC clock.
    Ticks(NicClock),
}

impl NicTime {
    /// For a started port: a driver whose timestamps have a known unit, else the NIC's clock
    /// if it stamps frames and can be read, else the TSC.
    fn of(port: &Port, tsc: &TscClock) -> Self {
        if port.name == "net_pcap" {
            return Self::Unit(1_000);
        }
        if !port.timestamps {
            return Self::Tsc;
        }
        let first = read_nic_clock(port.id, tsc);
        if first.is_some_and(nic_clock::is_unix_time) {
            // A clock on Unix time (mlx5 in real-time mode, REAL_TIME_CLOCK_ENABLE): its
            // stamps are nanoseconds since the epoch, used as they are.
            return Self::Unit(1);
        }
        std::thread::sleep(Duration::from_nanos(2 * nic_clock::MIN_SPAN_NS));
        match (first, read_nic_clock(port.id, tsc)) {
            (Some(a), Some(b)) => NicClock::from_samples(a, b).map_or(Self::Tsc, Self::Ticks),
            _ => Self::Tsc,
        }
    }
}

/// The NIC clock of `port` and the TSC clock, read together.
fn read_nic_clock(port: u16, tsc: &TscClock) -> Option<Sample> {
    let mut ticks = 0u64;
    // SAFETY: a started port's id and an out-pointer to a local.
    let ok = unsafe { ffi::rte_eth_read_clock(port, &mut ticks) } == 0;
    ok.then(|| Sample { ticks, ns: tsc.now_ns() })
}

/// Largest frame reassembled from a multi-segment mbuf chain; longer chains are cut.
const MAX_FRAME: usize = 16 * 1024;

/// Receiving from one RX queue index of every port: the state of one poll loop.
struct Rx {
    queue: u16,
    bufs: [*mut ffi::rte_mbuf; BURST],
    /// Offset and flag of the mbuf RX timestamp dynamic field, if any PMD provides one.
    ts_field: Option<(usize, u64)>,
    clock: TscClock,
    scratch: Box<[u8; MAX_FRAME]>,
    stop: StopWhen,
    /// TSC-clock nanoseconds at start and at the last frame received.
    started_ns: u64,
    last_rx_ns: u64,
    /// The last frame received on any queue (`--rss`: each worker polls a queue of its
    /// own), published at most every millisecond: `--idle-exit` ends a queue only once no
    /// queue has received for that long, not while the others still receive.
    any_rx_ns: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// When this queue last published to `any_rx_ns`.
    published_ns: u64,
    /// Per port id: what its RX timestamps are made of.
    nic_time: Vec<NicTime>,
    /// Per port id: whether frames carried a usable RX timestamp.
    saw_nic_ts: Vec<bool>,
    /// Per port id: what its frame times are made of, as its set-up says.
    stamps: Vec<Stamps>,
}

impl Rx {
    fn new(queue: u16, like: &Rx) -> Self {
        Self {
            queue,
            bufs: [std::ptr::null_mut(); BURST],
            ts_field: like.ts_field,
            clock: like.clock,
            scratch: Box::new([0u8; MAX_FRAME]),
            stop: like.stop,
            started_ns: like.started_ns,
            last_rx_ns: like.last_rx_ns,
            any_rx_ns: like.any_rx_ns.clone(),
            published_ns: 0,
            nic_time: like.nic_time.clone(),
            saw_nic_ts: vec![false; like.saw_nic_ts.len()],
            stamps: like.stamps.clone(),
        }
    }

    /// The TSC clock, when every port's frame times follow it (not a file's times).
    fn clock_ns(&self) -> Option<u64> {
        (!self.nic_time.iter().any(|t| matches!(t, NicTime::Unit(_)))).then(|| self.clock.now_ns())
    }

    /// Receives one burst from each port and hands each port's frames to `f` together (a
    /// frame in several segments, gathered into the scratch buffer, goes alone).
    fn poll<F: FnMut(&[Frame<'_>])>(&mut self, ports: &[Port], mut f: F) -> Result<Poll> {
        let mut total = 0;
        // One clock read per poll: the fallback timestamp of the burst and the stop check.
        let now_ns = self.clock.now_ns();
        let elapsed = |since: u64| Duration::from_nanos(now_ns.saturating_sub(since));
        if self.stop.duration.is_some_and(|d| elapsed(self.started_ns) >= d) {
            return Ok(Poll::End);
        }
        for port in ports {
            let n = port.rx_burst(self.queue, &mut self.bufs);
            if n == 0 {
                continue;
            }
            let pi = usize::from(port.id);
            if let NicTime::Ticks(c) = &mut self.nic_time[pi] {
                if c.due(now_ns) {
                    if let Some(s) = read_nic_clock(port.id, &self.clock) {
                        c.refresh(s);
                    }
                }
            }
            let nic = self.nic_time[pi];
            let mut frames = [Frame { data: &[], wire_len: 0, ts_ns: 0, source: 0 }; BURST];
            let mut ready = 0;
            for &m in &self.bufs[..n] {
                // SAFETY: m is a valid mbuf from this burst, not yet freed; its data room
                // holds data_len bytes at buf_addr + data_off (the slice lives until the
                // burst is freed below, after the last use of `frames`).
                let (first, chained, wire_len, ts) = unsafe {
                    let mb = &*m;
                    let stamp = match self.ts_field {
                        Some((off, flag)) if mb.ol_flags & flag != 0 => {
                            Some((m as *const u8).add(off).cast::<u64>().read_unaligned())
                        }
                        _ => None,
                    };
                    let ts = match (stamp, nic) {
                        (Some(t), NicTime::Unit(unit)) => t.saturating_mul(unit),
                        // The first stamp of a port whose clock reads as free-running ticks:
                        // stamps on Unix time (mlx5 in real-time mode while its clock reads
                        // the free-running counter) are used as they are from then on.
                        (Some(t), NicTime::Ticks(_))
                            if !self.saw_nic_ts[pi]
                                && nic_clock::is_unix_time(Sample { ticks: t, ns: now_ns }) =>
                        {
                            self.nic_time[pi] = NicTime::Unit(1);
                            t
                        }
                        (Some(t), NicTime::Ticks(c)) => c.to_ns(t),
                        _ => now_ns,
                    };
                    self.saw_nic_ts[pi] |= stamp.is_some() && !matches!(nic, NicTime::Tsc);
                    let first = std::slice::from_raw_parts(
                        (mb.buf_addr as *const u8).add(usize::from(mb.data_off)),
                        usize::from(mb.data_len),
                    );
                    (first, mb.nb_segs > 1, mb.pkt_len, ts)
                };
                if !chained {
                    frames[ready] = Frame { data: first, wire_len, ts_ns: ts, source: port.id };
                    ready += 1;
                    continue;
                }
                // A chain, gathered into the scratch buffer: what is ready goes first, then
                // this frame alone.
                if ready > 0 {
                    f(&frames[..ready]);
                    ready = 0;
                }
                let mut len = 0;
                let mut seg = m as *const ffi::rte_mbuf;
                while !seg.is_null() && len < MAX_FRAME {
                    // SAFETY: every segment of the chain is a valid mbuf of this burst, not
                    // yet freed, whose data room holds data_len bytes at buf_addr + data_off;
                    // the chain ends with a null `next`.
                    let (part, next) = unsafe {
                        let s = &*seg;
                        let part = std::slice::from_raw_parts(
                            (s.buf_addr as *const u8).add(usize::from(s.data_off)),
                            usize::from(s.data_len),
                        );
                        (part, s.next)
                    };
                    let take = part.len().min(MAX_FRAME - len);
                    self.scratch[len..len + take].copy_from_slice(&part[..take]);
                    len += take;
                    seg = next;
                }
                f(&[Frame { data: &self.scratch[..len], wire_len, ts_ns: ts, source: port.id }]);
            }
            if ready > 0 {
                f(&frames[..ready]);
            }
            free_bulk(&mut self.bufs, n);
            total += n;
        }
        use std::sync::atomic::Ordering::Relaxed;
        if total > 0 {
            // Published once a millisecond at most: no line shared by the workers is
            // written per burst.
            if now_ns.saturating_sub(self.published_ns) >= 1_000_000 {
                self.any_rx_ns.fetch_max(now_ns, Relaxed);
                self.published_ns = now_ns;
            }
            self.last_rx_ns = now_ns;
            return Ok(Poll::Frames(total));
        }
        if let Some(d) = self.stop.idle {
            if elapsed(self.last_rx_ns) >= d && elapsed(self.any_rx_ns.load(Relaxed)) >= d {
                return Ok(Poll::End);
            }
        }
        Ok(Poll::Idle)
    }

    fn time_sources(&self) -> Vec<&'static str> {
        self.saw_nic_ts.iter().zip(&self.stamps).map(|(&stamped, s)| s.name(stamped)).collect()
    }
}

/// Bytes DPDK keeps in front of a frame in its mbuf (`RTE_PKTMBUF_HEADROOM`).
const MBUF_HEADROOM: usize = 128;

/// What the net_pcap vdevs among EAL's arguments that replay their file with
/// `infinite_rx=1` ask of the mbufs (see [`looped_vdevs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looped {
    /// The mbuf size to use (`--mbuf-size`, raised to hold the largest frame when DPDK's
    /// default would not).
    pub mbuf_size: u16,
    /// When the size was raised, a note saying why.
    pub note: Option<String>,
    /// The frames of those files, every one of which such a vdev keeps in an mbuf of the
    /// pool for the whole run (0 without such a vdev).
    pub frames: u64,
    /// The first of those files, to name in a message, and how many there are.
    pub file: Option<String>,
    pub files: u32,
}

/// The mbufs for the net_pcap vdevs among `eal_args` that replay their file with
/// `infinite_rx=1`: such a vdev keeps every frame of its file in one mbuf of the pool, and
/// refuses to start ("Multiseg mbufs are not supported") when one does not fit, or when
/// the pool has fewer mbufs than the file has frames. `mbuf_size` 0 (the default) becomes
/// room for the largest frame of those files when DPDK's default is too small; a given
/// size too small for them is an error naming the size needed. The frames they keep are
/// counted for the pool's size (see [`DpdkCapture::start`] and `--mbufs`).
pub fn looped_vdevs(eal_args: &[String], mbuf_size: u16) -> Result<Looped> {
    let mut needed = 0;
    let mut largest_in = None;
    let (mut frames, mut first, mut files) = (0, None, 0);
    for vdev in pcap_vdevs(eal_args).filter(|v| v.looped) {
        for file in vdev.files {
            // A file DPDK cannot read either: EAL names it when the vdev fails to start.
            let Ok((largest, n)) = crate::capture::pcap::frame_sizes(Path::new(file)) else { continue };
            frames += n;
            files += 1;
            first.get_or_insert_with(|| file.to_string());
            if largest + MBUF_HEADROOM > needed {
                needed = largest + MBUF_HEADROOM;
                largest_in = Some((largest, file));
            }
        }
    }
    let looped = |mbuf_size, note| Ok(Looped { mbuf_size, note, frames, file: first.clone(), files });
    let Some((largest, file)) = largest_in else { return looped(mbuf_size, None) };
    // SAFETY: returns a compile-time constant.
    let default = usize::from(unsafe { ffi::roceprobe_mbuf_default_buf_size() });
    let given = if mbuf_size == 0 { default } else { usize::from(mbuf_size) };
    if needed <= given {
        return looped(mbuf_size, None);
    }
    let Ok(size) = u16::try_from(needed) else {
        bail!("{file} has a frame of {largest} bytes, more than one mbuf can hold: net_pcap with infinite_rx=1 cannot replay it");
    };
    if mbuf_size != 0 {
        bail!(
            "--mbuf-size {mbuf_size} is too small for {file} with infinite_rx=1 (every frame in one mbuf; its largest is {largest} bytes): use --mbuf-size {size} or more"
        );
    }
    let note = format!(
        "roceprobe: mbufs of {size} bytes, for {file}'s largest frame ({largest} bytes; net_pcap with infinite_rx=1 keeps every frame in one mbuf)"
    );
    looped(size, Some(note))
}

/// The capture files the net_pcap vdevs among EAL's arguments read (`rx_pcap`), for the
/// checks that keep the run's outputs off its inputs.
pub fn vdev_files(eal_args: &[String]) -> Vec<std::path::PathBuf> {
    pcap_vdevs(eal_args).flat_map(|v| v.files).map(std::path::PathBuf::from).collect()
}

/// A net_pcap `--vdev` among EAL's arguments: its name, the files it reads (`rx_pcap`),
/// and whether it loops them (`infinite_rx=1`).
pub struct PcapVdev<'a> {
    pub name: &'a str,
    pub files: Vec<&'a str>,
    pub looped: bool,
}

/// The net_pcap vdevs among EAL's arguments, by either of the names DPDK knows the driver
/// by (`net_pcap`, and its older alias `eth_pcap`).
pub fn pcap_vdevs(eal_args: &[String]) -> impl Iterator<Item = PcapVdev<'_>> {
    let pcap = |spec: &&str| spec.starts_with("net_pcap") || spec.starts_with("eth_pcap");
    vdev_specs(eal_args).filter(pcap).map(|spec| {
        let mut kv = spec.split(',');
        let name = kv.next().unwrap_or_default();
        let opts: Vec<(&str, &str)> = kv.filter_map(|o| o.split_once('=')).collect();
        PcapVdev {
            name,
            files: opts.iter().filter(|(k, _)| *k == "rx_pcap").map(|(_, f)| *f).collect(),
            looped: opts.contains(&("infinite_rx", "1")),
        }
    })
}

/// What a port's frame times are made of, as far as its set-up says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stamps {
    /// The NIC's RX timestamps (or net_pcap's from a live interface).
    Nic,
    /// A capture file's times (net_pcap reading a file once).
    File,
    /// None: the probe's clock times the frames (`--probe-clock`, a NIC that does not
    /// stamp, a net_pcap looping its file).
    Probe,
}

impl Stamps {
    /// The summary's name for frame times made of this (`time_sources`), given whether
    /// frames carried stamps.
    fn name(self, stamped: bool) -> &'static str {
        match (self, stamped) {
            (Stamps::File, true) => "pcap",
            (Stamps::Nic, true) => "nic",
            _ => "tsc",
        }
    }
}

/// The name EAL gave port `id` (a vdev's is its `--vdev` name).
fn port_name(id: u16) -> Option<String> {
    let mut name = [0 as std::os::raw::c_char; 64];
    // SAFETY: the buffer has room for RTE_ETH_NAME_MAX_LEN (64) bytes with the NUL.
    let ok = unsafe { ffi::rte_eth_dev_get_name_by_port(id, name.as_mut_ptr()) } == 0;
    // SAFETY: on success the buffer holds a NUL-terminated string.
    ok.then(|| unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned())
}

/// The `--vdev` devices among EAL's arguments (`--vdev SPEC` or `--vdev=SPEC`).
pub fn vdev_specs(eal_args: &[String]) -> impl Iterator<Item = &str> {
    eal_args.iter().enumerate().filter_map(|(i, a)| match a.strip_prefix("--vdev") {
        Some("") => eal_args.get(i + 1).map(String::as_str),
        Some(rest) => rest.strip_prefix('='),
        None => None,
    })
}

/// What the ports are asked for besides queues and mbufs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSetup {
    /// The largest frame to receive whole (`--max-frame`).
    pub max_frame: u32,
    pub flow_control: FlowControl,
    /// `--probe-clock`: frames timed by the probe at receive, the timestamp offload off.
    pub probe_clock: bool,
    /// Frames that looped net_pcap vdevs keep in the pool for the whole run (see
    /// [`looped_vdevs`]): added to the pool's default size.
    pub looped_frames: u32,
}

/// Live capture from DPDK ports. Source ids are port ids. With one RX queue per port it is
/// polled as a whole; with N (`--rss`), [`DpdkCapture::queue`] gives each worker its queue
/// index of every port.
pub struct DpdkCapture {
    // Field order matters: ports are dropped (stopped, closed) before the pool.
    ports: Vec<Port>,
    _pool: Mempool,
    rx: Rx,
}

impl DpdkCapture {
    /// Initialises EAL with `eal_args`, then starts `ports` (all EAL found, if empty).
    /// `mbufs`: the pool's size (0: enough for every RX ring); `mbuf_size`: each mbuf's data
    /// room (0: DPDK's default); `setup`: the largest frame, flow control, and whether every
    /// frame is timed by the TSC at RX, whatever the port stamps.
    pub fn start(
        eal_args: &[String],
        ports: &[u16],
        stop: StopWhen,
        mbufs: u32,
        mbuf_size: u16,
        rx_queues: u16,
        setup: PortSetup,
    ) -> Result<Self> {
        let probe_clock = setup.probe_clock;
        eal_init(eal_args)?;
        let ids = ports_to_capture(ports);
        if ids.is_empty() {
            match eal_diagnostic() {
                Some(d) => bail!("DPDK found no ports: {d}"),
                None => bail!("DPDK found no ports: bind a NIC to DPDK or pass a vdev, e.g. -- --vdev net_pcap0,rx_pcap=FILE"),
            }
        }
        // Enough mbufs for every RX ring, the burst in flight and the per-lcore caches, and
        // for the frames that looped net_pcap vdevs keep.
        let rings = ids.len() as u32 * u32::from(rx_queues.max(1));
        let mbufs = if mbufs > 0 {
            mbufs
        } else {
            (rings * 1024 + rings * BURST as u32 + 512).max(4095).saturating_add(setup.looped_frames)
        };
        // SAFETY: no preconditions after EAL init.
        let socket = unsafe { ffi::rte_socket_id() } as i32;
        // Every port's plan before anything is configured: a port that cannot do what is
        // asked stops the start with its reason.
        // SAFETY: returns a compile-time constant.
        let data_room =
            if mbuf_size == 0 { unsafe { ffi::roceprobe_mbuf_default_buf_size() } } else { mbuf_size };
        let wanted = Wanted {
            rx_queues: rx_queues.max(1),
            max_frame: setup.max_frame,
            mbuf_frame: u32::from(data_room).saturating_sub(MBUF_HEADROOM as u32),
            probe_clock,
        };
        let mut plans = Vec::with_capacity(ids.len());
        let vdevs: Vec<PcapVdev> = pcap_vdevs(eal_args).collect();
        let mut stamps = Vec::with_capacity(ids.len());
        for &id in &ids {
            let caps = capabilities(id)?;
            let mut plan = port_plan::plan(&caps, &wanted).map_err(|e| anyhow!("port {id}: {e}"))?;
            let pcap = caps.driver == "net_pcap";
            let vdev = port_name(id).and_then(|n| vdevs.iter().find(|v| v.name == n));
            let stamp = match vdev {
                _ if probe_clock || !(plan.timestamps || pcap) => Stamps::Probe,
                Some(v) if pcap && v.looped => {
                    plan.times = "times from the probe's clock (net_pcap with infinite_rx=1 does not stamp the frames it loops)".into();
                    Stamps::Probe
                }
                Some(v) if pcap && !v.files.is_empty() => Stamps::File,
                // net_pcap on a live interface (`iface=`, `rx_iface=`): libpcap's times of
                // the kernel's capture, in µs, as a file's.
                Some(_) if pcap => {
                    plan.times = "times from libpcap's capture of its interface (µs)".into();
                    Stamps::File
                }
                _ => Stamps::Nic,
            };
            stamps.push((id, stamp));
            for w in &plan.warnings {
                crate::note!("roceprobe: warning: port {id}: {w}");
            }
            plans.push((id, caps, plan));
        }
        let pool = Mempool::create("roceprobe_rx", mbufs, mbuf_size, socket)?;
        let mut started = Vec::with_capacity(ids.len());
        for (id, caps, plan) in &plans {
            let mut port = Port::start(*id, caps, plan, rx_queues.max(1), &pool, 1024, setup.flow_control)?;
            crate::note!("{}", port.setup_line());
            // A file net_pcap reads once, damaged or cut short: read through here first, so
            // that it is told (by the reader) and the summary says so, as replay's would.
            // (A looped file was read through already, for its frames' sizes.)
            if let Some(v) = port_name(*id).and_then(|n| vdevs.iter().find(|v| v.name == n)) {
                if !v.looped {
                    port.cut_short = v
                        .files
                        .iter()
                        .any(|f| crate::capture::pcap::cut_short(Path::new(f)).unwrap_or(false));
                }
            }
            started.push(port);
        }
        let mut offset: c_int = -1;
        let mut flag: u64 = 0;
        // SAFETY: out-pointers to locals; registering the field is idempotent and returns
        // the one a PMD (e.g. net_pcap, mlx5) already registered.
        let ts_field = unsafe {
            (ffi::rte_mbuf_dyn_rx_timestamp_register(&mut offset, &mut flag) == 0 && offset >= 0)
                .then_some((offset as usize, flag))
        };
        for note in eal_notes() {
            crate::note!("{note}");
        }
        let clock = TscClock::new();
        let now = clock.now_ns();
        let max_id = started.iter().map(|p| usize::from(p.id) + 1).max().unwrap_or(0);
        let mut nic_time = vec![NicTime::Tsc; max_id];
        if !probe_clock {
            for p in &started {
                nic_time[usize::from(p.id)] = NicTime::of(p, &clock);
            }
        }
        let mut port_stamps = vec![Stamps::Probe; max_id];
        for (id, stamp) in stamps {
            port_stamps[usize::from(id)] = stamp;
        }
        let rx = Rx {
            stamps: port_stamps,
            queue: 0,
            bufs: [std::ptr::null_mut(); BURST],
            ts_field,
            clock,
            scratch: Box::new([0u8; MAX_FRAME]),
            stop,
            started_ns: now,
            last_rx_ns: now,
            any_rx_ns: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(now)),
            published_ns: 0,
            nic_time,
            saw_nic_ts: vec![false; max_id],
        };
        Ok(Self { ports: started, _pool: pool, rx })
    }

    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// What each port's frame times will be made of, before any frame arrived: `nic` where
    /// the port stamps frames in a usable unit, `pcap` where net_pcap gives a file's times,
    /// else `tsc`.
    pub fn expected_time_sources(&self) -> Vec<&'static str> {
        let stamped = |t: &NicTime| !matches!(t, NicTime::Tsc);
        self.rx.nic_time.iter().zip(&self.rx.stamps).map(|(t, s)| s.name(stamped(t))).collect()
    }

    /// Receive statistics per port id, read from any thread.
    pub fn port_stats(&self) -> Vec<SourceStats> {
        port_stats(&self.ports)
    }

    /// RX queues per port.
    pub fn rx_queues(&self) -> u16 {
        self.ports.first().map_or(1, |p| p.rx_queues)
    }

    /// Queue `q` of every port, for the worker that owns it. Each queue keeps its own stop
    /// conditions (an idle queue ends on its own).
    pub fn queue(&self, q: u16) -> QueueCapture<'_> {
        QueueCapture { ports: &self.ports, rx: Rx::new(q, &self.rx) }
    }

    /// Records which ports a queue saw NIC RX timestamps on (for `time_sources`).
    pub fn note_nic_timestamps(&mut self, seen: &[bool]) {
        for (mine, &s) in self.rx.saw_nic_ts.iter_mut().zip(seen) {
            *mine |= s;
        }
    }
}

/// The most frames one RX queue of each of `ports` holds, together: what a stopped capture
/// of one queue index still analyses (see `Capture::backlog`).
fn ring_frames(ports: &[Port]) -> u64 {
    ports.iter().map(|p| u64::from(p.rx_desc)).sum()
}

/// Statistics per port id of these ports (the ids between them left out of `--port`: not
/// captured).
fn port_stats(ports: &[Port]) -> Vec<SourceStats> {
    let max = ports.iter().map(|p| usize::from(p.id) + 1).max().unwrap_or(0);
    let mut v = vec![SourceStats::default(); max];
    for p in ports {
        v[usize::from(p.id)] = p.stats();
    }
    v
}

/// One RX queue index of every port of a [`DpdkCapture`] (`--rss`): what one worker polls.
/// Port statistics are the whole capture's business, so `stats` is empty here.
pub struct QueueCapture<'a> {
    ports: &'a [Port],
    rx: Rx,
}

// SAFETY: the mbuf pointers in `rx.bufs` only live between an RX burst and its bulk free,
// both inside one `poll` call; between calls the array holds stale values never read.
unsafe impl Send for QueueCapture<'_> {}

impl QueueCapture<'_> {
    /// Per port id: whether this queue's frames carried NIC RX timestamps.
    pub fn nic_timestamps(&self) -> &[bool] {
        &self.rx.saw_nic_ts
    }
}

impl Capture for QueueCapture<'_> {
    fn poll<F: FnMut(Frame<'_>)>(&mut self, mut f: F) -> Result<Poll> {
        self.rx.poll(self.ports, |fs| fs.iter().for_each(|fr| f(*fr)))
    }

    fn backlog(&self) -> u64 {
        ring_frames(self.ports)
    }

    fn poll_burst<F: FnMut(&[Frame<'_>])>(&mut self, f: F) -> Result<Poll> {
        self.rx.poll(self.ports, f)
    }

    fn stats(&mut self) -> Vec<SourceStats> {
        Vec::new()
    }

    fn time_sources(&self) -> Vec<&'static str> {
        self.rx.time_sources()
    }

    fn clock_ns(&self) -> Option<u64> {
        self.rx.clock_ns()
    }
}

impl Capture for DpdkCapture {
    fn poll<F: FnMut(Frame<'_>)>(&mut self, mut f: F) -> Result<Poll> {
        self.rx.poll(&self.ports, |fs| fs.iter().for_each(|fr| f(*fr)))
    }

    /// Every queue of every port polled here (one each, but with --rss).
    fn backlog(&self) -> u64 {
        ring_frames(&self.ports)
    }

    fn poll_burst<F: FnMut(&[Frame<'_>])>(&mut self, f: F) -> Result<Poll> {
        self.rx.poll(&self.ports, f)
    }

    fn stats(&mut self) -> Vec<SourceStats> {
        port_stats(&self.ports)
    }

    fn time_sources(&self) -> Vec<&'static str> {
        self.rx.time_sources()
    }

    fn clock_ns(&self) -> Option<u64> {
        self.rx.clock_ns()
    }
}

// --- Memory and CPU placement ---------------------------------------------------------
//
// The few operating-system calls the rest of the probe needs besides DPDK's, here so that
// every `unsafe` block stays in this module.

/// Asks the CPU to bring `lines` cache lines from `p` on into the cache. A hint: it never
/// faults, whatever the address, and does nothing on other architectures.
#[inline(always)]
pub fn prefetch<T>(p: *const T, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for k in 0..lines {
        // SAFETY: PREFETCHT0 is a hint that never faults, even on an invalid address; the
        // pointer is only computed (wrapping), never dereferenced.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                p.cast::<i8>().wrapping_add(64 * k),
                std::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, lines);
}

/// Advises transparent huge pages for the whole 2 MiB pages inside `[start, start + len)`,
/// memory the caller owns. Best effort: where THP is off, nothing changes.
pub fn advise_huge_pages(start: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    let first = start.next_multiple_of(HUGE);
    let end = start.saturating_add(len) & !(HUGE - 1);
    if end <= first {
        return;
    }
    // SAFETY: [first, end) lies inside memory the caller owns, rounded inwards to page
    // boundaries; MADV_HUGEPAGE changes how pages are backed, never their contents, and
    // fails harmlessly (EINVAL) where THP is off.
    unsafe {
        libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
    }
}

/// The CPUs the calling thread may run on.
pub fn thread_cpus() -> Option<Vec<usize>> {
    // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into `set`, a
    // zeroed cpu_set_t owned here; CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// Runs `f` with the calling thread on `cpus` (none: where it is), then puts it back
/// where it was: threads `f` starts are on `cpus` from their first instruction on.
pub fn on_cpus<T>(cpus: &[usize], f: impl FnOnce() -> T) -> T {
    if cpus.is_empty() {
        return f();
    }
    let home = thread_cpus();
    pin_thread(cpus);
    let t = f();
    if let Some(home) = home {
        pin_thread(&home);
    }
    t
}

/// Large allocations (128 KiB and up: the buffers of interval snapshots and transmission
/// batches) are always mapped on their own and given back to the system when freed. glibc's
/// default raises that threshold to the size of each large block freed, after which such
/// blocks come from the heap and stay resident once freed: a backlog of the stats side
/// (the worker allocates rather than wait) would leave resident memory higher after every
/// hiccup, for months.
pub fn return_large_blocks() {
    // SAFETY: mallopt only sets an allocator parameter; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// CPUs online.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).max(1) as usize
}

/// Pins the calling thread to `cpus` (best effort: a failure leaves it where it was).
pub fn pin_thread(cpus: &[usize]) {
    // SAFETY: `set` is a zeroed cpu_set_t owned here; CPU_SET only writes bits below
    // CPU_SETSIZE (checked); sched_setaffinity reads size_of::<cpu_set_t>() bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Waits up to `timeout_ms` for `fd` to have bytes to read (or its writer's end closed, or
/// an error, which the read then tells): whether it has. Interrupted by a signal: `false`,
/// as if the time had run out. (Here with the crate's other calls into C.)
pub fn wait_readable(fd: std::os::fd::RawFd, timeout_ms: i32) -> std::io::Result<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, valid for the call.
    match unsafe { libc::poll(&mut p, 1, timeout_ms) } {
        n if n < 0 => {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        n => Ok(n > 0),
    }
}

/// Clears `O_NONBLOCK` on a file opened with it (so that the open did not wait).
pub fn set_blocking(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor the file owns, with no pointer argument.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Takes an exclusive advisory lock (`flock`) on an open file or folder without waiting:
/// false if another open file description holds it.
pub fn try_lock(f: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the file owns, with no pointer argument.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    match std::io::Error::last_os_error() {
        e if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
        e => Err(e),
    }
}

/// Releases a lock [`try_lock`] took: from the open file description, so also from a
/// process forked meanwhile that still holds a copy of the descriptor.
pub fn unlock(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the file owns, with no pointer argument.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A file mapped read-only into memory, for replay to read frames in place.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is private and read-only; nothing writes through it, so sharing or
// moving it between threads is sound.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the whole of `file` (`None` for an empty file, which cannot be mapped), and
    /// tells the kernel it will be read in order. The file must not be modified or cut
    /// while it is mapped (replay reads its input files; a capture still being written is
    /// read up to where it was at the start).
    pub fn of(file: &std::fs::File) -> std::io::Result<Option<Mapping>> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| std::io::Error::other("file larger than the address space"))?;
        if len == 0 {
            return Ok(None);
        }
        // SAFETY: a fresh private read-only mapping of an open file descriptor; the kernel
        // picks the address; the result is checked before use.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0)
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: [p, p + len) is the mapping just made; the advice only affects read-ahead.
        unsafe { libc::madvise(p, len, libc::MADV_SEQUENTIAL) };
        Ok(NonNull::new(p.cast::<u8>()).map(|ptr| Mapping { ptr, len }))
    }

    /// Gives back the memory of the pages wholly in `[from, to)`, read already: the
    /// process's resident memory stays that of the part being read, whatever the file's
    /// size. Reading them again (nothing does) would fetch them from the file anew.
    pub fn release(&self, from: usize, to: usize) {
        const PAGE: usize = 4096;
        let (a, b) = (from.next_multiple_of(PAGE), to.min(self.len) & !(PAGE - 1));
        if b > a {
            // SAFETY: [a, b) lies inside the mapping; MADV_DONTNEED on a private read-only
            // file mapping drops the pages, whose content the file still holds.
            unsafe { libc::madvise(self.ptr.as_ptr().add(a).cast(), b - a, libc::MADV_DONTNEED) };
        }
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr..ptr + len is mapped readable for as long as `self` lives. (A file
        // truncated by another process while mapped makes reads past its new end fault:
        // replay files must not be cut while they are read.)
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `of`, after its last use.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::port_plan::flags::*;
    use dpdk_sys as ffi;

    #[test]
    fn an_eal_start_without_hugepages_says_what_to_do() {
        // What DPDK 22.11's EAL printed on this machine (no hugepages reserved, no
        // --no-huge), then errno EACCES.
        let text = "EAL: Detected CPU lcores: 2\nEAL: Detected NUMA nodes: 1\nEAL: Detected shared linkage of DPDK\nEAL: Multi-process socket /var/run/dpdk/rte/mp_socket\nEAL: Selected IOVA mode 'PA'\nEAL: FATAL: Cannot get hugepage information.\nEAL: Cannot get hugepage information.\n";
        let line = super::eal_failure_line(text, libc::EACCES);
        assert_eq!(
            line,
            "DPDK EAL initialisation failed: EAL: FATAL: Cannot get hugepage information. (Permission denied): reserve hugepages (docs/DEPLOYMENT.md, \"Hugepages\"), or run without them: --no-huge -m 1024 after --"
        );
        // Any other failure as EAL says it.
        let other = super::eal_failure_line("EAL: Cannot init memory\n", libc::ENOMEM);
        assert_eq!(other, "DPDK EAL initialisation failed: EAL: Cannot init memory (Cannot allocate memory)");
    }

    #[test]
    fn the_port_plans_flags_are_dpdks() {
        // SAFETY: each returns a compile-time constant of the DPDK headers.
        let (ip, udp, l3, scatter, timestamp) = unsafe {
            (
                ffi::roceprobe_rss_hf_ip(),
                ffi::roceprobe_rss_hf_udp(),
                ffi::roceprobe_rss_hf_l3_src_dst_only(),
                ffi::roceprobe_rx_offload_scatter(),
                ffi::roceprobe_rx_offload_timestamp(),
            )
        };
        assert_eq!(ip, RSS_IP);
        assert_eq!(udp, RSS_NONFRAG_IPV4_UDP | RSS_NONFRAG_IPV6_UDP | RSS_IPV6_UDP_EX);
        assert_eq!(l3, RSS_L3_SRC_ONLY | RSS_L3_DST_ONLY);
        assert_eq!((scatter, timestamp), (RX_OFFLOAD_SCATTER, RX_OFFLOAD_TIMESTAMP));
    }
}
