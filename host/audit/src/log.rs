//! [`AuditLog`]: the file writer. Calls hand their reports to a bounded
//! queue; one thread numbers, chains and appends them in batches, rotates
//! the file by size, and, while the file cannot be written, keeps what it
//! could not write, retries, and (failing closed) has calls refused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use wasm_agent_sandbox::{CallAuditor, CallReport};

use crate::chain;
use crate::files::{self, ChainEnd};
use crate::head::{Head, HeadFile};
use crate::record::{self, Event};
use crate::sink::{AuditSink, FileSink};
use crate::{AuditError, AuditOptions, DigestKey, FailMode};

/// Records waiting for the writer at most.
const QUEUE: usize = 16 * 1024;
/// Bytes kept while the file cannot be written; later records are dropped
/// (and a gap record says how many).
const MAX_PENDING: usize = 16 << 20;
/// How often the writer retries a file it could not write.
const RETRY: Duration = Duration::from_millis(250);
/// How long [`AuditLog::flush`] waits for the writer.
const FLUSH_WAIT: Duration = Duration::from_secs(10);
/// How long the writer lets records gather after a batch (a flush, or the
/// log's end, cuts it short). A busy host then wakes it fifty times a
/// second, not once per call: handing over a record is a push onto the
/// queue, with no wake-up of another thread, and the file is written in
/// batches of many records.
const LINGER: Duration = Duration::from_millis(20);

enum Message {
    Record(Event, SystemTime),
    Flush(Ack),
}

/// Who waits for the records before a flush to be written.
enum Ack {
    /// A thread ([`AuditLog::flush`]).
    Thread(mpsc::Sender<Result<(), String>>),
    /// A task ([`CallAuditor::settled`]).
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

/// What the calls and the writer share.
struct Shared {
    path: PathBuf,
    fail: FailMode,
    arguments: bool,
    /// The key of the arguments digests.
    key: DigestKey,
    /// Why the file cannot be written now, if it cannot.
    failure: Mutex<Option<String>>,
    /// Records dropped before the writer saw them (queue full, failing open).
    dropped: AtomicU64,
}

/// An append-only, hash-chained audit log in a file. Cheap to share; the
/// last handle dropped writes what is queued and stops the writer.
pub struct AuditLog {
    shared: Arc<Shared>,
    queue: SyncSender<Message>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl AuditLog {
    /// Opens (or creates, private to its owner) the log and continues its
    /// chain, or the chain of its last rotated file; writes an `open`
    /// record. A damaged end of the chain is refused (move the file away),
    /// and so is a chain that does not reach the head noted beside it
    /// (`FILE.head`: records were cut from its end). Torn bytes after the
    /// last complete record (a write cut short) are cut off, and the `open`
    /// record says how many.
    pub fn open(options: AuditOptions) -> Result<Self, AuditError> {
        let path = options.path.clone();
        // A device or a pipe (/dev/stderr) gets no files beside it.
        let special = std::fs::metadata(&path).is_ok_and(|m| !m.is_file());
        // The head as found (none for a log from before heads), then the
        // lock, before the log's end is read: no other writer is mid-batch.
        let noted = match special {
            true => None,
            false => Head::read(&Head::path_beside(&path))?,
        };
        let head_file = match special {
            true => None,
            false => Some(HeadFile::open(Head::path_beside(&path))?),
        };
        let (end, torn) = files::chain_end(&path)?;
        if let Some(head) = noted {
            head.reached_by(&end, |seq| files::record_hash(&path, seq))
                .map_err(|reason| AuditError::Cut {
                    path: path.clone(),
                    reason,
                })?;
        }
        let mut options = options;
        if options.digest_key.is_none() && !special {
            options.digest_key = Some(DigestKey::load_or_create(&DigestKey::path_beside(&path))?);
        }
        let sink = FileSink::open(&path, &end, torn.as_ref(), options.max_size, head_file)?;
        if let Some(torn) = &torn {
            tracing::warn!(
                target: "wasm_agent::audit",
                path = %torn.path.display(),
                "cut off {} torn bytes after the audit log's last complete record",
                torn.bytes
            );
        }
        let torn_bytes = torn.map_or(0, |t| t.bytes);
        Self::start(Box::new(sink), end, options, torn_bytes)
    }

    /// A log whose records go to `sink`, continuing the chain that ends at
    /// `end` (`options.path` names the sink in messages); writes an `open`
    /// record.
    pub fn open_sink(
        sink: Box<dyn AuditSink>,
        end: ChainEnd,
        options: AuditOptions,
    ) -> Result<Self, AuditError> {
        Self::start(sink, end, options, 0)
    }

    fn start(
        sink: Box<dyn AuditSink>,
        end: ChainEnd,
        options: AuditOptions,
        torn_bytes: u64,
    ) -> Result<Self, AuditError> {
        let path = options.path.clone();
        let key = match options.digest_key {
            Some(key) => key,
            None => DigestKey::random()?,
        };
        let shared = Arc::new(Shared {
            path: path.clone(),
            fail: options.fail,
            arguments: options.arguments,
            key,
            failure: Mutex::new(None),
            dropped: AtomicU64::new(0),
        });
        let mut writer = Writer {
            shared: shared.clone(),
            sink,
            end,
            pending: Vec::new(),
            pending_bytes: 0,
            acks: Vec::new(),
        };
        let entry = options.entry.clone();
        writer.seal(&Event::Open { entry, torn_bytes }, SystemTime::now());
        // Failing closed, a log that cannot be written is an error now;
        // failing open, the writer keeps the record and retries.
        match (writer.write(), options.fail) {
            (Ok(()), _) => {}
            (Err(reason), FailMode::Closed) => return Err(AuditError::Write { path, reason }),
            (Err(reason), FailMode::Open) => writer.report(Err(reason)),
        }
        let (queue, receiver) = mpsc::sync_channel(QUEUE);
        let thread = std::thread::Builder::new()
            .name("wasm-agent-audit".into())
            .spawn(move || writer.run(receiver))
            .map_err(|e| AuditError::Write {
                path: path.clone(),
                reason: format!("cannot start the writer: {e}"),
            })?;
        Ok(Self {
            shared,
            queue,
            writer: Mutex::new(Some(thread)),
        })
    }

    /// Whether calls are refused while the log cannot be written.
    pub fn fails_closed(&self) -> bool {
        self.shared.fail == FailMode::Closed
    }

    /// The log's file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Waits until every record handed over so far is written; the error
    /// says why they could not be.
    pub fn flush(&self) -> Result<(), AuditError> {
        let (ack, answer) = mpsc::channel();
        let error = |reason: String| AuditError::Write {
            path: self.shared.path.clone(),
            reason,
        };
        self.queue
            .send(Message::Flush(Ack::Thread(ack)))
            .map_err(|_| error("the writer has stopped".into()))?;
        self.wake_writer();
        answer
            .recv_timeout(FLUSH_WAIT)
            .map_err(|_| error(format!("not written within {FLUSH_WAIT:?}")))?
            .map_err(error)
    }

    /// Cuts the writer's wait for more records short.
    fn wake_writer(&self) {
        if let Some(writer) = &*self.writer.lock().unwrap_or_else(PoisonError::into_inner) {
            writer.thread().unpark();
        }
    }

    fn failure(&self) -> Option<String> {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // The writer ends once the queue is closed and drained; a clone of
        // the sender is all that holds it open, and it is ours.
        let (closed, _) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.queue, closed));
        if let Some(writer) = writer {
            writer.thread().unpark();
            let _ = writer.join();
        }
    }
}

impl CallAuditor for AuditLog {
    fn admit(&self) -> Result<(), String> {
        match (self.shared.fail, self.failure()) {
            (FailMode::Closed, Some(reason)) => Err(format!(
                "the audit log {} cannot be written ({reason}), and it fails closed \
                 (audit fail = \"closed\")",
                self.shared.path.display()
            )),
            _ => Ok(()),
        }
    }

    fn wants_arguments(&self) -> bool {
        self.shared.arguments
    }

    fn arguments_digest(&self, arguments: &str) -> String {
        self.shared.key.digest(arguments)
    }

    /// Failing closed, a call is answered only once its record is in the
    /// file (the operating system's), where killing the process cannot
    /// lose it.
    fn settled(&self) -> Option<wasm_agent_sandbox::report::Settled> {
        if self.shared.fail != FailMode::Closed {
            return None;
        }
        let (ack, written) = tokio::sync::oneshot::channel();
        if self.queue.send(Message::Flush(Ack::Task(ack))).is_err() {
            return Some(Box::pin(async {
                Err("the writer has stopped".to_string())
            }));
        }
        self.wake_writer();
        Some(Box::pin(async move {
            written
                .await
                .unwrap_or_else(|_| Err("the writer has stopped".into()))
        }))
    }

    fn record(&self, mut report: CallReport) {
        if !self.shared.arguments {
            report.arguments = None;
        }
        let time = report.started;
        self.enqueue(Message::Record(Event::Call(Box::new(report)), time));
    }
}

impl AuditLog {
    /// Records what an operator did in the console.
    pub fn operator_action(&self, action: record::OperatorAction) {
        self.enqueue(Message::Record(Event::Operator(action), SystemTime::now()));
    }

    fn enqueue(&self, message: Message) {
        match self.queue.try_send(message) {
            Ok(()) => {}
            // Failing closed, a call waits for room rather than go unrecorded.
            Err(TrySendError::Full(message)) if self.shared.fail == FailMode::Closed => {
                let _ = self.queue.send(message);
            }
            Err(_) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The writer thread's state.
struct Writer {
    shared: Arc<Shared>,
    sink: Box<dyn AuditSink>,
    end: ChainEnd,
    /// Sealed lines not yet written, and their size.
    pending: Vec<String>,
    pending_bytes: usize,
    /// Flushes waiting for `pending` to be written.
    acks: Vec<Ack>,
}

impl Writer {
    fn run(mut self, queue: Receiver<Message>) {
        loop {
            let first = if self.pending.is_empty() {
                queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                queue.recv_timeout(RETRY)
            };
            let (open, busy) = match first {
                Ok(message) => {
                    self.take(message);
                    // A batch: whatever else is queued now.
                    for message in queue.try_iter().take(QUEUE) {
                        self.take(message);
                    }
                    (true, true)
                }
                Err(RecvTimeoutError::Timeout) => (true, false),
                Err(RecvTimeoutError::Disconnected) => (false, false),
            };
            self.note_dropped();
            let written = self.write();
            self.report(written);
            if !open {
                return;
            }
            if busy {
                std::thread::park_timeout(LINGER);
            }
        }
    }

    fn take(&mut self, message: Message) {
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
    fn seal(&mut self, event: &Event, time: SystemTime) {
        let body = record::body(event, self.end.seq, &self.end.prev, time);
        let (line, hash) = chain::seal(&body);
        self.pending_bytes += line.len() + 1;
        self.pending.push(line);
        self.end = ChainEnd {
            seq: self.end.seq + 1,
            prev: hash,
        };
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
    fn write(&mut self) -> Result<(), String> {
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
    fn report(&mut self, written: Result<(), String>) {
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
