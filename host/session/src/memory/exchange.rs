//! One-time marks and mailboxes in memory: every entry expires, and expired
//! ones are swept as new ones come, so what a process holds is bounded by
//! what was made within the longest time to live.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Entries kept before expired ones are swept on the next insert.
const SWEEP_AT: usize = 1024;

/// The marks and mailboxes of one in-memory store.
#[derive(Debug, Default)]
pub(super) struct Exchange {
    used: HashMap<String, Instant>,
    /// Open mailboxes: until when, and the message once delivered.
    mailboxes: HashMap<String, (Instant, Option<String>)>,
}

impl Exchange {
    pub(super) fn use_once(&mut self, token: &str, ttl: Duration) -> bool {
        let now = Instant::now();
        if self.used.len() >= SWEEP_AT {
            self.used.retain(|_, until| *until > now);
        }
        match self.used.get(token) {
            Some(until) if *until > now => false,
            _ => {
                self.used.insert(token.to_string(), now + ttl);
                true
            }
        }
    }

    pub(super) fn open_mailbox(&mut self, address: &str, ttl: Duration) {
        let now = Instant::now();
        if self.mailboxes.len() >= SWEEP_AT {
            self.mailboxes.retain(|_, (until, _)| *until > now);
        }
        self.mailboxes
            .insert(address.to_string(), (now + ttl, None));
    }

    pub(super) fn deliver(&mut self, address: &str, message: &str) -> bool {
        match self.mailboxes.get_mut(address) {
            Some((until, slot @ None)) if *until > Instant::now() => {
                *slot = Some(message.to_string());
                true
            }
            _ => false,
        }
    }

    pub(super) fn mailboxes(&self, prefix: &str, limit: usize) -> Vec<(String, Option<String>)> {
        let now = Instant::now();
        let mut open: Vec<(String, Option<String>)> = self
            .mailboxes
            .iter()
            .filter(|(address, (until, _))| *until > now && address.starts_with(prefix))
            .map(|(address, (_, message))| (address.clone(), message.clone()))
            .collect();
        open.sort();
        open.truncate(limit);
        open
    }

    pub(super) fn mailbox(&self, address: &str) -> Option<Option<String>> {
        let (until, message) = self.mailboxes.get(address)?;
        (*until > Instant::now()).then(|| message.clone())
    }

    pub(super) fn collect_mail(&mut self, address: &str) -> Option<String> {
        match self.mailboxes.get(address) {
            Some((_, Some(_))) => self.mailboxes.remove(address).and_then(|(_, m)| m),
            _ => None,
        }
    }

    pub(super) fn close_mailbox(&mut self, address: &str) {
        self.mailboxes.remove(address);
    }
}
