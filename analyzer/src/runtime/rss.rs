//! Hardware dispatch (`live --rss --workers N`): every port has N RX queues and its RSS
//! spreads frames by a symmetric hash of the IP pair with the same key and redirection table,
//! so all packets between two hosts, both directions, at every vantage, reach the same queue
//! index. Worker q polls queue q of every port and analyses what it receives, as a lone
//! worker would: nothing is copied, dispatched or shared. This thread only turns the port
//! counters into per-interval reports.
//!
//! The NIC hashes the outermost IP header it parses, so this suits plain SPAN mirrors. With
//! ERSPAN the outer pair is switch-to-probe and the inner pairs would be split across workers
//! by session rather than by host pair: software dispatch handles those.

use super::worker::TimeUse;
use super::{drive, PipelineConfig, PortReport, Recycled, ToStats, Worker};
use crate::capture::dpdk::DpdkCapture;
use crate::track::io::IoCountsByPair;
use anyhow::Result;
use crossbeam_channel::{Receiver, Sender};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Runs one worker per RX queue on its own pinned thread until every queue's source ends or
/// `stop` is set. `nic_ts` receives, per worker, the ports it saw NIC RX timestamps on.
pub fn run(
    capture: &DpdkCapture,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    tx: Sender<ToStats>,
    backs: Vec<Receiver<Recycled>>,
    ports: &mut PortReport,
    nic_ts: &mut Vec<Vec<bool>>,
) -> (Result<()>, IoCountsByPair, [TimeUse; 2]) {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    // The latest capture time any worker has seen, for the port report's intervals (one
    // atomic update per burst, not per packet).
    let seen = AtomicU64::new(0);
    let mut ios = BTreeMap::new();
    let mut time_use = [TimeUse::default(); 2];
    let mut result = Ok(());
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(backs.len());
        for (id, back) in backs.into_iter().enumerate() {
            let mut queue = capture.queue(id as u16);
            let tx = tx.clone();
            let seen = &seen;
            let core = super::worker_core(cfg, &cores, id);
            let spawned = std::thread::Builder::new().name(format!("roceprobe-worker-{id}")).spawn_scoped(
                scope,
                move || {
                    if let Some(c) = core {
                        core_affinity::set_for_current(c);
                    }
                    let mut w = Worker::with_recycling(id, cfg, tx, back);
                    let r = drive(&mut queue, &mut w, stop, |ts, _| {
                        seen.fetch_max(ts, Ordering::Relaxed);
                    });
                    w.finish();
                    (r, w.io_counts(), w.time_use(), queue.nic_timestamps().to_vec())
                },
            );
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The workers already started stop with the run.
                    stop.store(true, Ordering::Relaxed);
                    result = Err(e.into());
                    break;
                }
            }
        }
        while !handles.iter().all(|h| h.is_finished()) {
            // 0 until a worker has seen a frame (a live capture's times, from the probe's
            // clock or the NIC's, are never 0).
            let t = seen.load(Ordering::Relaxed);
            if t > 0 {
                ports.observe(t, || capture.port_stats(), &tx);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        for h in handles {
            match h.join() {
                Ok((r, counts, used, nic)) => {
                    if let (Err(e), Ok(())) = (r, &result) {
                        result = Err(e);
                    }
                    super::merge_worker(&mut ios, &mut time_use, counts, used);
                    nic_ts.push(nic);
                }
                Err(_) => result = Err(anyhow::anyhow!("a worker thread panicked")),
            }
        }
    });
    (result, ios, time_use)
}
