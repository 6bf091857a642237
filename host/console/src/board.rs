//! The calls the console shows: those in flight (a pipeline layer, told
//! when each call starts and ends) and the last [`RECENT`] ended, each made
//! a row from the report the host's auditor gets (a [`CallAuditor`] beside
//! it), told to live pages as they happen.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use serde::Serialize;
use tokio::sync::broadcast;
use wasm_agent_pipeline::{Called, Layer, Next, ToolCall};
use wasm_agent_sandbox::report::{CallAuditor, CallReport, Settled};

use crate::calls::CallRow;
use crate::series::Series;

/// How many ended calls the board keeps.
pub const RECENT: usize = 200;
/// Events a live page may fall behind by before it is told to reload.
const BACKLOG: usize = 512;

/// What live pages are told.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum BoardEvent {
    /// A call began.
    Started(Running),
    /// The call `id` (of a `Started`) ended.
    Ended {
        /// Its board id.
        id: u64,
    },
    /// How a call ended.
    Call {
        /// Its row.
        row: Arc<CallRow>,
        /// The row as JSON, made once for every live page.
        json: Arc<str>,
    },
}

/// A call in flight.
#[derive(Clone, Debug, Serialize)]
pub struct Running {
    /// The board's id of it.
    pub id: u64,
    /// The tool called.
    pub tool: String,
    /// Who called it.
    pub principal: Option<String>,
    /// Their tenant.
    pub tenant: Option<String>,
    /// When it began (RFC 3339).
    pub started: String,
    #[serde(skip)]
    clock: Option<Instant>,
}

impl Running {
    /// How long it has run, in milliseconds.
    pub fn running_ms(&self) -> u128 {
        self.clock.map_or(0, |c| c.elapsed().as_millis())
    }
}

#[derive(Default)]
struct State {
    recent: VecDeque<Arc<CallRow>>,
    running: BTreeMap<u64, Running>,
    next: u64,
}

/// The calls in flight and the last ones, and the hour's figures.
pub struct CallBoard {
    state: Mutex<State>,
    series: Mutex<Series>,
    events: broadcast::Sender<BoardEvent>,
}

impl std::fmt::Debug for CallBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallBoard")
    }
}

impl Default for CallBoard {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            series: Mutex::default(),
            events: broadcast::channel(BACKLOG).0,
        }
    }
}

impl CallBoard {
    /// An empty board.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The calls in flight, oldest first.
    pub fn running(&self) -> Vec<Running> {
        self.lock().running.values().cloned().collect()
    }

    /// The ended calls, newest first.
    pub(crate) fn recent(&self) -> Vec<Arc<CallRow>> {
        self.lock().recent.iter().rev().cloned().collect()
    }

    /// The hour's figures.
    pub fn series(&self) -> Series {
        self.series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Live events from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<BoardEvent> {
        self.events.subscribe()
    }

    /// A call of `tool` by `principal` began: it is in flight until the
    /// guard is dropped.
    fn start(
        self: &Arc<Self>,
        tool: &str,
        principal: Option<&str>,
        tenant: Option<&str>,
    ) -> InFlightGuard {
        let mut state = self.lock();
        state.next += 1;
        let running = Running {
            id: state.next,
            tool: tool.to_string(),
            principal: principal.map(String::from),
            tenant: tenant.map(String::from),
            started: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            clock: Some(Instant::now()),
        };
        state.running.insert(running.id, running.clone());
        drop(state);
        let id = running.id;
        let _ = self.events.send(BoardEvent::Started(running));
        InFlightGuard {
            board: self.clone(),
            id,
        }
    }

    /// A call ended as `report` says.
    pub fn record(&self, report: &CallReport) {
        let row = Arc::new(CallRow::of(report));
        let json: Arc<str> = serde_json::to_string(&*row).unwrap_or_default().into();
        self.series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(
                report.outcome,
                row.duration_us,
                row.refusals,
                SystemTime::now(),
            );
        let mut state = self.lock();
        if state.recent.len() == RECENT {
            state.recent.pop_front();
        }
        state.recent.push_back(row.clone());
        drop(state);
        let _ = self.events.send(BoardEvent::Call { row, json });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Takes a call off the board when dropped (ended, or its caller gone).
struct InFlightGuard {
    board: Arc<CallBoard>,
    id: u64,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.board.lock().running.remove(&self.id);
        let _ = self.board.events.send(BoardEvent::Ended { id: self.id });
    }
}

/// The pipeline layer that puts calls in flight on the board.
pub struct InFlight(pub Arc<CallBoard>);

#[async_trait::async_trait]
impl Layer for InFlight {
    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let _guard = self.0.start(
            &call.tool.name,
            call.context.user_id.as_deref(),
            call.context.tenant_id.as_deref(),
        );
        next.run(call).await
    }
}

/// The host's auditor (if any) with the board told of every report too.
pub struct Recording {
    board: Arc<CallBoard>,
    inner: Option<Arc<dyn CallAuditor>>,
}

impl Recording {
    /// Reports go to `board`, and to `inner` as before.
    pub fn new(board: Arc<CallBoard>, inner: Option<Arc<dyn CallAuditor>>) -> Self {
        Self { board, inner }
    }
}

impl CallAuditor for Recording {
    fn admit(&self) -> Result<(), String> {
        self.inner.as_ref().map_or(Ok(()), |a| a.admit())
    }

    fn wants_arguments(&self) -> bool {
        self.inner.as_ref().is_some_and(|a| a.wants_arguments())
    }

    fn arguments_digest(&self, arguments: &str) -> String {
        match &self.inner {
            Some(inner) => inner.arguments_digest(arguments),
            None => wasm_agent_sandbox::report::arguments_digest(arguments),
        }
    }

    fn record(&self, report: CallReport) {
        self.board.record(&report);
        if let Some(inner) = &self.inner {
            inner.record(report);
        }
    }

    fn settled(&self) -> Option<Settled> {
        self.inner.as_ref().and_then(|a| a.settled())
    }
}
