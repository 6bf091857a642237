//! The audit log's writer: it numbers, chains and appends records. It is
//! shared by the log's thread and the calls. Written in batches, calls
//! queue their records and the thread writes them. Written inline (a file
//! that fails closed), each call seals and writes its own record before
//! it is answered, and the thread only retries what could not be written.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use crate::FailMode;
use crate::chain;
use crate::files::ChainEnd;
use crate::head::Head;
use crate::log::Shared;
use crate::record::{self, Event};
use crate::sink::AuditSink;

/// Records waiting for the writer at most.
pub(crate) const QUEUE: usize = 16 * 1024;
/// Bytes kept while the file cannot be written; later records are dropped
/// (and a gap record says how many).
const MAX_PENDING: usize = 16 << 20;
/// How often the writer retries a file it could not write.
const RETRY: Duration = Duration::from_millis(250);
/// How long the writer lets records gather after a batch (a flush, or the
/// log's end, cuts it short). A busy host then wakes it fifty times a
/// second, not once per call: handing over a record is a push onto the
/// queue, with no wake-up of another thread, and the file is written in
/// batches of many records.
const LINGER: Duration = Duration::from_millis(20);

/// What calls hand the thread of a log written in batches.
pub(crate) enum Message {
    Record(Event, SystemTime),
    Flush(Ack),
}

/// Who waits for the records before a flush to be written.
pub(crate) enum Ack {
    /// A thread ([`AuditLog::flush`](crate::AuditLog::flush)).
    Thread(mpsc::Sender<Result<(), String>>),
    /// A task ([`CallAuditor::settled`](wasm_agent_sandbox::CallAuditor::settled)).
    Task(tokio::sync::oneshot::Sender<Result<(), String>>),
}

impl Ack {
    fn send(self, result: Result<(), String>) {
        let _ = match self {
            Ack::Thread(ack) => ack.send(result).ok(),
            Ack::Task(ack) => ack.send(result).ok(),
        };
    }
}

/// The writer, shared by the log's thread and the calls.
pub(crate) type SharedWriter = Arc<Mutex<Writer>>;

/// The writer's state.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    sink: Box<dyn AuditSink>,
    end: ChainEnd,
    /// Sealed lines not yet written, and their size.
    pending: Vec<String>,
    pending_bytes: usize,
    /// Flushes waiting for `pending` to be written.
    acks: Vec<Ack>,
}

/// Locks `writer`; a poisoned lock is taken as it is, like the log's
/// other locks.
pub(crate) fn lock(writer: &SharedWriter) -> MutexGuard<'_, Writer> {
    writer.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The thread of a log written in batches: it takes what the calls
/// queued, writes it, and lets the next records gather.
pub(crate) fn write_batches(writer: SharedWriter, queue: Receiver<Message>) {
    loop {
        let written = lock(&writer).is_written();
        let first = if written {
            queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            queue.recv_timeout(RETRY)
        };
        let (open, busy) = match first {
            Ok(message) => {
                let mut writer = lock(&writer);
                writer.take(message);
                // A batch: whatever else is queued now.
                for message in queue.try_iter().take(QUEUE) {
                    writer.take(message);
                }
                (true, true)
            }
            Err(RecvTimeoutError::Timeout) => (true, false),
            Err(RecvTimeoutError::Disconnected) => (false, false),
        };
        // What it says is noted for `admit` and the waiting flushes.
        let _ = lock(&writer).write_and_report();
        if !open {
            return;
        }
        if busy {
            std::thread::park_timeout(LINGER);
        }
    }
}

/// The thread of a log written inline: it retries what the calls could
/// not write (they wake it), until `stop` closes.
pub(crate) fn retry_inline(writer: SharedWriter, stop: Receiver<Message>) {
    loop {
        let written = lock(&writer).is_written();
        match written {
            true => std::thread::park(),
            false => std::thread::park_timeout(RETRY),
        }
        let open = !matches!(stop.try_recv(), Err(TryRecvError::Disconnected));
        let mut writer = lock(&writer);
        if !writer.is_written() {
            // What it says is noted for `admit` and the waiting flushes.
            let _ = writer.write_and_report();
        }
        if !open {
            return;
        }
    }
}

impl Writer {
    /// A writer continuing the chain that ends at `end`.
    pub(crate) fn new(shared: Arc<Shared>, sink: Box<dyn AuditSink>, end: ChainEnd) -> Self {
        Self {
            shared,
            sink,
            end,
            pending: Vec::new(),
            pending_bytes: 0,
            acks: Vec::new(),
        }
    }

    /// Seals a record, or keeps a flush's waiter.
    pub(crate) fn take(&mut self, message: Message) {
        match message {
            // Failing closed, nothing is dropped: calls are refused while
            // the log cannot be written, so only calls in flight add more.
            Message::Record(event, time)
                if self.pending_bytes < MAX_PENDING || self.shared.fail == FailMode::Closed =>
            {
                self.seal(&event, time)
            }
            Message::Record(..) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Message::Flush(ack) => self.acks.push(ack),
        }
    }

    /// Numbers, chains and queues one record.
    pub(crate) fn seal(&mut self, event: &Event, time: SystemTime) {
        let body = record::body(event, self.end.seq, &self.end.prev, time);
        let (line, hash) = chain::seal(&body);
        self.pending_bytes += line.len() + 1;
        self.pending.push(line);
        self.end = ChainEnd {
            seq: self.end.seq + 1,
            prev: hash,
        };
    }

    /// Writes what is pending (a gap record first if records were
    /// dropped), notes whether the file can be written and answers the
    /// flushes waiting; what it wrote, or why it could not.
    pub(crate) fn write_and_report(&mut self) -> Result<(), String> {
        self.note_dropped();
        let written = self.write();
        self.report(written.clone());
        written
    }

    /// Whether every record sealed so far is written.
    pub(crate) fn is_written(&self) -> bool {
        self.pending.is_empty()
    }

    /// A record of the records dropped since the last, in the chain.
    fn note_dropped(&mut self) {
        let dropped = self.shared.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(target: "wasm_agent::audit", dropped, "audit records were dropped");
            self.seal(&Event::Gap { dropped }, SystemTime::now());
        }
    }

    /// Writes what is pending.
    pub(crate) fn write(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let head = Head::of(&self.end).expect("records were sealed");
        self.sink.append(&self.pending, &head)?;
        self.pending.clear();
        self.pending_bytes = 0;
        Ok(())
    }

    /// Records whether the file can be written, and answers flushes.
    pub(crate) fn report(&mut self, written: Result<(), String>) {
        let mut failure = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match (&written, failure.is_some()) {
            (Err(reason), false) => tracing::error!(
                target: "wasm_agent::audit",
                path = %self.shared.path.display(),
                "the audit log cannot be written: {reason}"
            ),
            (Ok(()), true) => tracing::warn!(
                target: "wasm_agent::audit",
                path = %self.shared.path.display(),
                "the audit log can be written again"
            ),
            _ => {}
        }
        *failure = written.clone().err();
        drop(failure);
        for ack in self.acks.drain(..) {
            ack.send(written.clone());
        }
    }
}
