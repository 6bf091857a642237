//! `wasm-agent audit verify`: checks a log's chain (its files, or every
//! replica's rows in a table), that it reaches the head its writer noted
//! and any head the operator kept (`--head`), and prints the head to keep.

use anyhow::Context as _;
use wasm_agent::audit::postgres::read_chains;
use wasm_agent::audit::{Expect, Verified, verify_records};

/// `wasm-agent audit verify FILE|URL`: prints what holds, or fails naming
/// the first broken record or the cut.
pub fn verify(
    file: &std::path::Path,
    partial: bool,
    heads: &[String],
    json: bool,
) -> anyhow::Result<()> {
    if let Some(url) = crate::audit::postgres_url(file) {
        return verify_table(url, partial, heads, json);
    }
    if heads.len() > 1 {
        anyhow::bail!("--head: a file log has one chain; give one HASH");
    }
    let expect = Expect {
        partial,
        head: heads.first().map(|h| checked_hash(h)).transpose()?,
    };
    let verified = wasm_agent::audit::verify(file, &expect)
        .with_context(|| format!("{} does not verify", file.display()))?;
    if json {
        let mut report = summary(&verified);
        report["files"] = serde_json::json!(verified.files);
        println!("{report}");
        return Ok(());
    }
    let seqs = verified
        .seqs
        .map_or("no records".into(), |(a, b)| format!("seq {a}..={b}"));
    println!(
        "ok: {} records ({seqs}) in {} file(s); head {}",
        verified.records,
        verified.files.len(),
        verified.head
    );
    notes(&verified);
    Ok(())
}

/// `wasm-agent audit verify postgres://...`: every replica's chain.
fn verify_table(url: &str, partial: bool, heads: &[String], json: bool) -> anyhow::Result<()> {
    let mut wanted = std::collections::HashMap::new();
    for head in heads {
        let (replica, hash) = head.split_once('=').with_context(|| {
            format!("--head {head:?}: for a table, give REPLICA=HASH (the replica's head)")
        })?;
        wanted.insert(replica.to_string(), checked_hash(hash)?);
    }
    let chains = std::thread::scope(|scope| {
        scope
            .spawn(|| read_chains(url))
            .join()
            .map_err(|_| anyhow::anyhow!("reading the audit table failed"))
    })??;
    let mut report = Vec::new();
    for chain in chains {
        let replica = chain.replica;
        let expect = Expect {
            partial,
            head: wanted.remove(&replica),
        };
        let verified = verify_records(
            &format!("replica {replica:?}"),
            chain.records,
            chain.head,
            &expect,
        )
        .with_context(|| format!("the chain of replica {replica:?} does not verify"))?;
        if !json {
            println!(
                "ok: replica {replica:?}: {} records; head {}",
                verified.records, verified.head
            );
            notes(&verified);
        }
        let mut entry = summary(&verified);
        entry["replica"] = serde_json::json!(replica);
        report.push(entry);
    }
    if let Some(replica) = wanted.keys().next() {
        anyhow::bail!(
            "--head names replica {replica:?}, which has no records and no head in the table: \
             its chain was removed"
        );
    }
    if json {
        println!("{}", serde_json::Value::Array(report));
    } else if report.is_empty() {
        println!("ok: no records");
    }
    Ok(())
}

fn checked_hash(text: &str) -> anyhow::Result<String> {
    let hash = text.trim().to_ascii_lowercase();
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        anyhow::bail!("--head {text:?}: a head is a record's hash, 64 hex digits");
    }
    Ok(hash)
}

fn summary(verified: &Verified) -> serde_json::Value {
    serde_json::json!({
        "records": verified.records,
        "first_seq": verified.seqs.map(|s| s.0),
        "last_seq": verified.seqs.map(|s| s.1),
        "head": verified.head,
        "gaps": verified.gaps,
        "torn_bytes": verified.torn_bytes,
    })
}

fn notes(verified: &Verified) {
    if verified.gaps > 0 {
        println!(
            "note: {} gap record(s): records were dropped while the log could not keep up",
            verified.gaps
        );
    }
    if verified.torn_bytes > 0 {
        println!(
            "note: a torn last record ({} bytes, no newline at its end) follows the chain: a \
             write cut short by a crash, not a changed record; the writer cuts it off when it \
             next opens the log",
            verified.torn_bytes
        );
    }
}
