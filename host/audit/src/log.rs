//! [`AuditLog`]: the log calls report to. Failing open, or on a sink that
//! is not a regular file, calls hand their reports to a bounded queue and
//! one thread numbers, chains and appends them in batches. A file that
//! fails closed is written by each call before it is answered, with no
//! hand-off to another thread. Either way the file is rotated by size, and
//! while it cannot be written what could not be written is kept and
//! retried, and (failing closed) calls are refused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use wasm_agent_sandbox::{CallAuditor, CallReport};

use crate::files::{self, ChainEnd};
use crate::head::{Head, HeadFile};
use crate::record::{self, Event};
use crate::sink::{AuditSink, FileSink};
use crate::writer::{self, Ack, Message, QUEUE, SharedWriter, Writer};
use crate::{AuditError, AuditOptions, DigestKey, FailMode};

/// How long [`AuditLog::flush`] waits for the writer.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// What the calls and the writer share.
pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    pub(crate) fail: FailMode,
    arguments: bool,
    /// The key of the arguments digests.
    key: DigestKey,
    /// Why the file cannot be written now, if it cannot.
    pub(crate) failure: Mutex<Option<String>>,
    /// Records dropped before the writer saw them (queue full, failing open).
    pub(crate) dropped: AtomicU64,
}

/// An append-only, hash-chained audit log in a file. Cheap to share; the
/// last handle dropped writes what is queued and stops the writer.
pub struct AuditLog {
    shared: Arc<Shared>,
    writer: SharedWriter,
    /// Calls write their records themselves (see [`CallAuditor::settled`]);
    /// else they queue them for the thread.
    inline: bool,
    /// To the thread: records and flushes (written in batches), or only
    /// its end (written inline).
    queue: SyncSender<Message>,
    thread: Mutex<Option<JoinHandle<()>>>,
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
        // A regular file takes a record in a few microseconds: a call
        // failing closed writes its own rather than wait for a thread.
        let inline = options.fail == FailMode::Closed && !special;
        Self::start(Box::new(sink), end, options, torn_bytes, inline)
    }

    /// A log whose records go to `sink`, continuing the chain that ends at
    /// `end` (`options.path` names the sink in messages); writes an `open`
    /// record.
    pub fn open_sink(
        sink: Box<dyn AuditSink>,
        end: ChainEnd,
        options: AuditOptions,
    ) -> Result<Self, AuditError> {
        Self::start(sink, end, options, 0, false)
    }

    fn start(
        sink: Box<dyn AuditSink>,
        end: ChainEnd,
        options: AuditOptions,
        torn_bytes: u64,
        inline: bool,
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
        let mut writer = Writer::new(shared.clone(), sink, end);
        let entry = options.entry.clone();
        writer.seal(&Event::Open { entry, torn_bytes }, SystemTime::now());
        // Failing closed, a log that cannot be written is an error now;
        // failing open, the writer keeps the record and retries.
        match (writer.write(), options.fail) {
            (Ok(()), _) => {}
            (Err(reason), FailMode::Closed) => return Err(AuditError::Write { path, reason }),
            (Err(reason), FailMode::Open) => writer.report(Err(reason)),
        }
        let writer = Arc::new(Mutex::new(writer));
        let (queue, receiver) = mpsc::sync_channel(if inline { 0 } else { QUEUE });
        let theirs = writer.clone();
        let thread = std::thread::Builder::new()
            .name("wasm-agent-audit".into())
            .spawn(move || match inline {
                true => writer::retry_inline(theirs, receiver),
                false => writer::write_batches(theirs, receiver),
            })
            .map_err(|e| AuditError::Write {
                path: path.clone(),
                reason: format!("cannot start the writer: {e}"),
            })?;
        Ok(Self {
            shared,
            writer,
            inline,
            queue,
            thread: Mutex::new(Some(thread)),
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
        let error = |reason: String| AuditError::Write {
            path: self.shared.path.clone(),
            reason,
        };
        if self.inline {
            return self.write_inline().map_err(error);
        }
        let (ack, answer) = mpsc::channel();
        self.queue
            .send(Message::Flush(Ack::Thread(ack)))
            .map_err(|_| error("the writer has stopped".into()))?;
        self.wake_writer();
        answer
            .recv_timeout(FLUSH_WAIT)
            .map_err(|_| error(format!("not written within {FLUSH_WAIT:?}")))?
            .map_err(error)
    }

    /// Written inline: writes every record sealed and not yet written,
    /// on this thread; what could not be written is left to the thread to
    /// retry.
    fn write_inline(&self) -> Result<(), String> {
        let mut writer = writer::lock(&self.writer);
        if writer.is_written() {
            return Ok(());
        }
        let written = writer.write_and_report();
        drop(writer);
        if written.is_err() {
            self.wake_writer();
        }
        written
    }

    /// Cuts the writer's wait for more records short.
    fn wake_writer(&self) {
        if let Some(thread) = &*self.thread.lock().unwrap_or_else(PoisonError::into_inner) {
            thread.thread().unpark();
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
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // The writer ends once the queue is closed and drained; a clone of
        // the sender is all that holds it open, and it is ours.
        let (closed, _) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.queue, closed));
        if let Some(thread) = thread {
            thread.thread().unpark();
            let _ = thread.join();
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
    /// lose it. Written inline, the call writes it now, with any other
    /// record sealed and not yet written.
    fn settled(&self) -> Option<wasm_agent_sandbox::report::Settled> {
        if self.shared.fail != FailMode::Closed {
            return None;
        }
        if self.inline {
            return Some(Box::pin(std::future::ready(self.write_inline())));
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
        if self.inline {
            writer::lock(&self.writer).take(message);
            // Its call's answer waits for it (`settled`); an operator's
            // action is written now too.
            let _ = self.write_inline();
            return;
        }
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

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::record::OperatorAction;
    use std::sync::atomic::AtomicBool;

    fn lines(path: &Path) -> usize {
        std::fs::read_to_string(path).unwrap().lines().count()
    }

    #[test]
    fn failing_closed_a_file_holds_each_record_before_the_caller_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(AuditOptions::new(&path)).unwrap();
        assert_eq!(lines(&path), 1, "the open record");
        let action = OperatorAction {
            operator: "ann".into(),
            action: "log_in".into(),
            ..OperatorAction::default()
        };
        log.operator_action(action);
        assert_eq!(lines(&path), 2, "written by the caller, not later");
        let mut settled = log.settled().expect("failing closed, calls wait");
        let polled = settled
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert_eq!(polled, Poll::Ready(Ok(())), "nothing left to wait for");
        drop(log);
        assert_eq!(lines(&path), 2);
    }

    /// A sink that refuses every batch while `failing` is set.
    struct Flaky {
        failing: Arc<AtomicBool>,
        appended: Arc<Mutex<Vec<String>>>,
    }

    impl AuditSink for Flaky {
        fn append(&mut self, records: &[String], _head: &Head) -> Result<(), String> {
            if self.failing.load(Ordering::SeqCst) {
                return Err("no space left on device".into());
            }
            self.appended.lock().unwrap().extend_from_slice(records);
            Ok(())
        }
    }

    #[test]
    fn failing_closed_a_record_written_inline_that_fails_withholds_the_answer_until_retried() {
        let failing = Arc::new(AtomicBool::new(false));
        let appended = Arc::new(Mutex::new(Vec::new()));
        let sink = Flaky {
            failing: failing.clone(),
            appended: appended.clone(),
        };
        let options = AuditOptions::new(Path::new("flaky.jsonl"));
        let log = AuditLog::start(Box::new(sink), ChainEnd::start(), options, 0, true).unwrap();
        let count = || appended.lock().unwrap().len();
        assert_eq!(count(), 1, "the open record");

        failing.store(true, Ordering::SeqCst);
        log.operator_action(OperatorAction::default());
        let mut settled = log.settled().expect("failing closed, calls wait");
        let polled = settled
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(
            matches!(&polled, Poll::Ready(Err(reason)) if reason.contains("no space left")),
            "the call's answer must be withheld: {polled:?}"
        );
        assert!(log.admit().is_err(), "new calls are refused meanwhile");
        assert_eq!(count(), 1, "nothing was written");

        // The disk has room again: the thread writes the pending record.
        failing.store(false, Ordering::SeqCst);
        let waited = std::time::Instant::now();
        while count() < 2 && waited.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(count(), 2, "the pending record, written by the retry");
        assert!(appended.lock().unwrap()[1].contains("\"seq\":1"));
        assert!(log.admit().is_ok(), "calls are admitted again");
        let mut settled = log.settled().expect("failing closed, calls wait");
        let polled = settled
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert_eq!(polled, Poll::Ready(Ok(())));
    }

    #[test]
    fn failing_open_records_are_written_by_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut options = AuditOptions::new(&path);
        options.fail = FailMode::Open;
        let log = AuditLog::open(options).unwrap();
        assert!(log.settled().is_none(), "failing open, no call waits");
        log.operator_action(OperatorAction::default());
        log.flush().unwrap();
        assert_eq!(lines(&path), 2);
    }
}
