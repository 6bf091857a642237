//! Choosing what to merge: the instantiation that defines a function table
//! others import, those importers, and any instantiation between them that
//! they need and that needs them; failing that, a shim and the instantiation
//! calling its functions.

use std::collections::{HashMap, HashSet};

use wasm_encoder as enc;
use wasm_encoder::reencode::{Error as ReencodeError, Reencode, ReencodeComponent};
use wasmparser::{CanonicalFunction, ComponentAlias, Instance};

use super::{Entry, Level, Origin, Plan, Space};
use crate::RelinkError;
use crate::merge::{self, Kind, Summary};

/// The most rounds of choosing members.
const MAX_ROUNDS: usize = 64;
/// The most table definers tried (each try is up to `MAX_ROUNDS` rounds
/// over the level), so a component defining many tables costs no more.
const MAX_TABLE_SEEDS: usize = 4;

/// What choosing needs to know of every instantiation of a level.
struct Facts {
    refs: HashMap<usize, Vec<(Space, u32)>>,
    /// What each module instantiated here is (`None`: tags, not handled).
    summaries: HashMap<u32, Option<Summary>>,
    /// Where every import of every instantiation comes from.
    origins: HashMap<u32, Vec<(Origin, Kind)>>,
    /// How many times each module is instantiated.
    uses: HashMap<u32, u32>,
    /// The instantiations, in order, of which a summary is known.
    candidates: Vec<u32>,
}

impl Facts {
    fn gather(level: &Level<'_>) -> Result<Self, RelinkError> {
        let mut facts = Facts {
            refs: canon_refs(level)?,
            summaries: HashMap::new(),
            origins: HashMap::new(),
            uses: HashMap::new(),
            candidates: Vec::new(),
        };
        for index in 0..level.instances.len() as u32 {
            let Ok((module, args)) = level.instantiation(index) else {
                continue;
            };
            *facts.uses.entry(module).or_default() += 1;
            let Some(bytes) = level.module_bytes(module) else {
                continue;
            };
            if let std::collections::hash_map::Entry::Vacant(slot) = facts.summaries.entry(module) {
                slot.insert(merge::summary(bytes)?);
            }
            let Some(summary) = &facts.summaries[&module] else {
                continue;
            };
            let mut list = Vec::new();
            for (module, name, kind) in &summary.imports {
                list.push((level.import_origin(args, module, name)?, *kind));
            }
            facts.origins.insert(index, list);
            facts.candidates.push(index);
        }
        Ok(facts)
    }

    fn summary_of(&self, level: &Level<'_>, instance: u32) -> Option<&Summary> {
        let (module, _) = level.instantiation(instance).ok()?;
        self.summaries.get(&module)?.as_ref()
    }

    /// The instantiations importing an item of `kind` that `definer` exports
    /// under one of `names` (any name when `names` is `None`).
    fn importers(&self, definer: u32, kind: Kind, names: Option<&[String]>) -> Vec<u32> {
        self.candidates
            .iter()
            .copied()
            .filter(|i| {
                self.origins[i].iter().any(|(origin, k)| {
                    *k == kind
                        && matches!(origin, Origin::Export { instance, name }
                            if *instance == definer
                                && names.is_none_or(|names| names.contains(name)))
                })
            })
            .collect()
    }
}

/// The plan for `level`, or `None` when it has nothing to merge.
pub(super) fn plan(level: &Level<'_>) -> Result<Option<Plan>, RelinkError> {
    let facts = Facts::gather(level)?;
    for seed in table_seeds(level, &facts)
        .into_iter()
        .chain(shim_seed(level, &facts))
    {
        if let Some(plan) = grow(level, &facts, seed)? {
            return Ok(Some(plan));
        }
    }
    Ok(None)
}

/// The instantiations defining a table others import (a shared library's),
/// with those importers: the most imported first, at most `MAX_TABLE_SEEDS`.
fn table_seeds(level: &Level<'_>, facts: &Facts) -> Vec<(u32, Vec<u32>)> {
    let mut seeds = Vec::new();
    for &definer in &facts.candidates {
        let Some(tables) = facts.summary_of(level, definer).map(|s| &s.exported_tables) else {
            continue;
        };
        if tables.is_empty() {
            continue;
        }
        let importers = facts.importers(definer, Kind::Table, Some(tables));
        if !importers.is_empty() {
            seeds.push((definer, importers));
        }
    }
    seeds.sort_by_key(|(_, importers)| std::cmp::Reverse(importers.len()));
    seeds.truncate(MAX_TABLE_SEEDS);
    seeds
}

/// The shim `wit-component` puts before a module whose imports need its own
/// memory: a module importing nothing, whose functions call through a table
/// that a later module fills. With the instantiations calling those
/// functions (the main module), the shim becomes part of them, so that one
/// instance fewer is made and its imports wired on every instantiation.
fn shim_seed(level: &Level<'_>, facts: &Facts) -> Option<(u32, Vec<u32>)> {
    facts.candidates.iter().find_map(|&definer| {
        let summary = facts.summary_of(level, definer)?;
        if !summary.imports.is_empty() || summary.exported_tables.is_empty() {
            return None;
        }
        let importers = facts.importers(definer, Kind::Func, None);
        (!importers.is_empty()).then_some((definer, importers))
    })
}

/// The plan merging `seed` (a definer and its importers) and what they need
/// that needs them, or `None` when they cannot be merged.
fn grow(
    level: &Level<'_>,
    facts: &Facts,
    (definer, importers): (u32, Vec<u32>),
) -> Result<Option<Plan>, RelinkError> {
    let Facts {
        refs,
        origins,
        uses,
        ..
    } = facts;
    let summary_of = |instance: u32| facts.summary_of(level, instance);

    let eligible = |instance: u32| -> Result<bool, RelinkError> {
        let (module, _) = level.instantiation(instance)?;
        Ok(origins.contains_key(&instance)
            && uses.get(&module) == Some(&1)
            && !level.modules_elsewhere.contains(&module)
            && summary_of(instance).is_some_and(|s| !s.unmergeable))
    };
    let mut members = HashSet::new();
    for instance in std::iter::once(definer).chain(importers) {
        if eligible(instance)? {
            members.insert(instance);
        }
    }
    let mut rejected = HashSet::new();
    // Each round adds or removes a member for good; a component needing
    // more rounds than this is left as it is (the work stays bounded).
    for round in 0.. {
        if !members.contains(&definer) || round == MAX_ROUNDS {
            return Ok(None);
        }
        let taint = Taint::of(level, &members, refs);
        let mut sorted: Vec<u32> = members.iter().copied().collect();
        sorted.sort_unstable();
        // The first member importing something that depends on the members
        // through a non-member: that non-member joins, or the member leaves.
        let change = sorted.iter().find_map(|member| {
            origins[member].iter().find_map(|(origin, _)| match origin {
                Origin::Export { instance, .. } if members.contains(instance) => None,
                Origin::Export { instance, .. } if taint.instance(*instance) => {
                    Some((*member, Some(*instance)))
                }
                Origin::Item { space, index } if taint.item(*space, *index) => {
                    Some((*member, None))
                }
                _ => None,
            })
        });
        match change {
            None => break,
            Some((member, Some(needed))) if !rejected.contains(&needed) && eligible(needed)? => {
                let _ = member;
                members.insert(needed);
            }
            Some((member, _)) => {
                members.remove(&member);
                rejected.insert(member);
            }
        }
    }
    if members.len() < 2 {
        return Ok(None);
    }

    // What depends on the members moves after them; only core definitions
    // can (a component-level one would renumber the component's own items).
    let taint = Taint::of(level, &members, refs);
    let positions: HashSet<usize> = members
        .iter()
        .map(|m| level.instances[*m as usize])
        .collect();
    let (first, last) = (
        *positions.iter().min().expect("two members"),
        *positions.iter().max().expect("two members"),
    );
    for pos in first..=last {
        let movable = matches!(
            level.entries[pos],
            Entry::Instance { .. }
                | Entry::Alias {
                    defines: Some(_),
                    ..
                }
                | Entry::Canon {
                    defines: Some(_),
                    ..
                }
        );
        if taint.entries[pos] && !positions.contains(&pos) && !movable {
            return Ok(None);
        }
    }
    // The members' segments are applied together, at the last member's
    // place: a non-member instantiated in between must not run code then,
    // nor write where a member reads or writes.
    let shared: HashSet<&Origin> = members
        .iter()
        .flat_map(|m| origins[m].iter().map(|(origin, _)| origin))
        .collect();
    for instance in 0..level.instances.len() as u32 {
        let pos = level.instances[instance as usize];
        if pos < first || pos > last || members.contains(&instance) {
            continue;
        }
        let Ok((_, args)) = level.instantiation(instance) else {
            continue;
        };
        let Some(summary) = summary_of(instance) else {
            return Ok(None);
        };
        if summary.start {
            return Ok(None);
        }
        for (module, name) in &summary.writes {
            let origin = level.import_origin(args, module, name)?;
            let of_member =
                matches!(&origin, Origin::Export { instance, .. } if members.contains(instance));
            if of_member || shared.contains(&origin) {
                return Ok(None);
            }
        }
    }
    let mut members: Vec<u32> = members.into_iter().collect();
    members.sort_unstable();
    Plan::build(level, members, origins, taint.entries).map(Some)
}

/// Which definitions depend on the members.
pub(super) struct Taint {
    instances: Vec<bool>,
    items: HashMap<Space, Vec<bool>>,
    /// Per entry of the level.
    pub entries: Vec<bool>,
}

impl Taint {
    fn of(
        level: &Level<'_>,
        members: &HashSet<u32>,
        refs: &HashMap<usize, Vec<(Space, u32)>>,
    ) -> Self {
        let mut taint = Taint {
            instances: vec![false; level.instances.len()],
            items: HashMap::new(),
            entries: vec![false; level.entries.len()],
        };
        for (pos, entry) in level.entries.iter().enumerate() {
            let tainted = match entry {
                Entry::Instance { index, def } => {
                    let tainted = members.contains(index)
                        || match def {
                            Instance::Instantiate { args, .. } => {
                                args.iter().any(|a| taint.instance(a.index))
                            }
                            Instance::FromExports(exports) => exports
                                .iter()
                                .any(|e| taint.item(Space::of(e.kind), e.index)),
                        };
                    if let Some(slot) = taint.instances.get_mut(*index as usize) {
                        *slot = tainted;
                    }
                    tainted
                }
                Entry::Alias {
                    def: ComponentAlias::CoreInstanceExport { instance_index, .. },
                    defines: Some((space, index)),
                } => {
                    let tainted = taint.instance(*instance_index);
                    taint.set(*space, *index, tainted);
                    tainted
                }
                Entry::Canon { defines, .. } => {
                    let tainted = refs.get(&pos).is_some_and(|refs| {
                        refs.iter().any(|(space, index)| match space {
                            Space::Instance => taint.instance(*index),
                            _ => taint.item(*space, *index),
                        })
                    });
                    if let Some((space, index)) = defines {
                        taint.set(*space, *index, tainted);
                    }
                    tainted
                }
                _ => false,
            };
            taint.entries[pos] = tainted;
        }
        taint
    }

    fn instance(&self, index: u32) -> bool {
        self.instances.get(index as usize).copied().unwrap_or(false)
    }

    fn item(&self, space: Space, index: u32) -> bool {
        self.items
            .get(&space)
            .and_then(|items| items.get(index as usize))
            .copied()
            .unwrap_or(false)
    }

    fn set(&mut self, space: Space, index: u32, tainted: bool) {
        let items = self.items.entry(space).or_default();
        if items.len() <= index as usize {
            items.resize(index as usize + 1, false);
        }
        items[index as usize] = tainted;
    }
}

/// The core items each canonical function refers to, by entry.
fn canon_refs(level: &Level<'_>) -> Result<HashMap<usize, Vec<(Space, u32)>>, RelinkError> {
    let mut out = HashMap::new();
    for (pos, entry) in level.entries.iter().enumerate() {
        if let Entry::Canon { def, .. } = entry {
            out.insert(pos, references(def)?);
        }
    }
    Ok(out)
}

fn references(def: &CanonicalFunction) -> Result<Vec<(Space, u32)>, RelinkError> {
    let mut recorder = Recorder(Vec::new());
    recorder.parse_component_canonical(&mut enc::CanonicalFunctionSection::new(), def.clone())?;
    Ok(recorder.0)
}

/// Notes every core index it is asked to rewrite, and keeps it.
struct Recorder(Vec<(Space, u32)>);

impl Reencode for Recorder {
    type Error = RelinkError;

    fn function_index(&mut self, f: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.0.push((Space::Func, f));
        Ok(f)
    }
    fn table_index(&mut self, t: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.0.push((Space::Table, t));
        Ok(t)
    }
    fn memory_index(&mut self, m: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.0.push((Space::Memory, m));
        Ok(m)
    }
    fn global_index(&mut self, g: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.0.push((Space::Global, g));
        Ok(g)
    }
    fn tag_index(&mut self, t: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.0.push((Space::Tag, t));
        Ok(t)
    }
}

impl ReencodeComponent for Recorder {
    fn instance_index(&mut self, i: u32) -> u32 {
        self.0.push((Space::Instance, i));
        i
    }
}
