//! Writing a component level out again, renumbering its core items as the
//! plan reorders them.

use std::collections::{HashMap, HashSet};

use wasm_encoder as enc;
use wasm_encoder::reencode::{Error as ReencodeError, Reencode, ReencodeComponent};
use wasmparser::{ComponentAlias, Instance};

use super::{EMPTY_MODULE, Entry, Level, Origin, Plan, Space};
use crate::RelinkError;
use crate::merge::{self, EXTERNAL_MODULE};

/// `level` written out with `plan` applied and its nested components
/// replaced by `nested` (keyed by where each starts).
pub(super) fn emit(
    level: &Level<'_>,
    plan: Option<&Plan>,
    nested: &HashMap<usize, Vec<u8>>,
) -> Result<Vec<u8>, RelinkError> {
    let mut emitter = Emitter {
        level,
        plan,
        nested,
        out: enc::Component::new(),
        remap: Remap::default(),
        merged: None,
    };
    let Some(plan) = plan else {
        for pos in 0..level.entries.len() {
            emitter.entry(pos)?;
        }
        return Ok(emitter.out.finish());
    };
    let positions: HashSet<usize> = plan
        .members
        .iter()
        .map(|m| level.instances[*m as usize])
        .collect();
    let first = *positions.iter().min().expect("a plan has members");
    let last = *positions.iter().max().expect("a plan has members");
    let mut after = Vec::new();
    for pos in 0..level.entries.len() {
        if pos < first || pos > last {
            emitter.entry(pos)?;
        } else if positions.contains(&pos) {
            if pos == last {
                emitter.merged_instance(plan)?;
                for pos in after.drain(..) {
                    emitter.entry(pos)?;
                }
            }
        } else if plan.tainted[pos] {
            after.push(pos);
        } else {
            emitter.entry(pos)?;
        }
    }
    Ok(emitter.out.finish())
}

struct Emitter<'l, 'a> {
    level: &'l Level<'a>,
    plan: Option<&'l Plan>,
    nested: &'l HashMap<usize, Vec<u8>>,
    out: enc::Component,
    remap: Remap,
    /// The merged instance's new index, once written.
    merged: Option<u32>,
}

impl Emitter<'_, '_> {
    fn raw(&mut self, id: u8, data: &[u8]) {
        self.out.section(&enc::RawSection { id, data });
    }

    fn is_member(&self, instance: u32) -> bool {
        self.plan.is_some_and(|p| p.members.contains(&instance))
    }

    fn merged(&self) -> Result<u32, RelinkError> {
        self.merged.ok_or(RelinkError::Malformed(
            "a merged module's export used before it exists",
        ))
    }

    fn entry(&mut self, pos: usize) -> Result<(), RelinkError> {
        let bytes = self.level.bytes;
        match &self.level.entries[pos] {
            Entry::Raw { id, range } => self.raw(*id, &bytes[range.clone()]),
            Entry::Names { range } => {
                if self.plan.is_none() {
                    self.raw(0, &bytes[range.clone()]);
                }
            }
            Entry::Nested { range } => {
                let data = match self.nested.get(&range.start) {
                    Some(relinked) => relinked.as_slice(),
                    None => &bytes[range.clone()],
                };
                self.out.section(&enc::RawSection { id: 4, data });
            }
            Entry::Module { index, range } => {
                let data = match self.plan {
                    Some(plan) if *index == plan.module => plan.merged.as_slice(),
                    Some(plan) if plan.emptied.contains(index) => EMPTY_MODULE,
                    _ => &bytes[range.clone()],
                };
                self.out.section(&enc::RawSection { id: 1, data });
            }
            Entry::Instance { index, def } => {
                self.instance(def)?;
                self.remap.define(Space::Instance, *index);
            }
            Entry::Alias { def, defines } => {
                self.alias(def)?;
                if let Some((space, index)) = defines {
                    self.remap.define(*space, *index);
                }
            }
            Entry::Canon { def, defines } => {
                let mut section = enc::CanonicalFunctionSection::new();
                self.remap
                    .parse_component_canonical(&mut section, def.clone())?;
                if let Some(error) = self.remap.error.take() {
                    return Err(error);
                }
                self.out.section(&section);
                if let Some((space, index)) = defines {
                    self.remap.define(*space, *index);
                }
            }
        }
        Ok(())
    }

    fn instance(&mut self, def: &Instance<'_>) -> Result<(), RelinkError> {
        let mut section = enc::InstanceSection::new();
        match def {
            Instance::Instantiate { module_index, args } => {
                let mut new_args = Vec::new();
                for arg in args.iter() {
                    let index = if self.is_member(arg.index) {
                        self.forward(*module_index, arg.name, arg.index)?
                    } else {
                        self.remap.get(Space::Instance, arg.index)?
                    };
                    new_args.push((arg.name, enc::ModuleArg::Instance(index)));
                }
                section.instantiate(*module_index, new_args);
            }
            Instance::FromExports(exports) => {
                let mut items = Vec::new();
                for export in exports.iter() {
                    let index = self.remap.get(Space::of(export.kind), export.index)?;
                    items.push((export.name, export.kind.into(), index));
                }
                section.export_items(items);
            }
        }
        self.out.section(&section);
        Ok(())
    }

    fn alias(&mut self, def: &ComponentAlias<'_>) -> Result<(), RelinkError> {
        let mut section = enc::ComponentAliasSection::new();
        match def {
            ComponentAlias::CoreInstanceExport {
                kind,
                instance_index,
                name,
            } => {
                let (instance, name) = if self.is_member(*instance_index) {
                    (
                        self.merged()?,
                        format!("{}{name}", Plan::prefix(*instance_index)),
                    )
                } else {
                    (
                        self.remap.get(Space::Instance, *instance_index)?,
                        name.to_string(),
                    )
                };
                section.alias(enc::Alias::CoreInstanceExport {
                    instance,
                    kind: (*kind).into(),
                    name: &name,
                });
            }
            ComponentAlias::InstanceExport {
                kind,
                instance_index,
                name,
            } => {
                section.alias(enc::Alias::InstanceExport {
                    instance: *instance_index,
                    kind: (*kind).into(),
                    name,
                });
            }
            ComponentAlias::Outer { kind, count, index } => {
                section.alias(enc::Alias::Outer {
                    kind: (*kind).into(),
                    count: *count,
                    index: *index,
                });
            }
        }
        self.out.section(&section);
        Ok(())
    }

    /// A new core item aliased from `instance`'s export `name`.
    fn alias_export(&mut self, instance: u32, kind: merge::Kind, name: &str) -> u32 {
        let mut section = enc::ComponentAliasSection::new();
        section.alias(enc::Alias::CoreInstanceExport {
            instance,
            kind: kind.export_kind(),
            name,
        });
        self.out.section(&section);
        self.remap.fresh(Space::of_kind(kind))
    }

    /// A new instance exporting `items`.
    fn bundle(&mut self, items: &[(String, merge::Kind, u32)]) -> u32 {
        let mut section = enc::InstanceSection::new();
        section.export_items(
            items
                .iter()
                .map(|(name, kind, index)| (name.as_str(), kind.export_kind(), *index)),
        );
        self.out.section(&section);
        self.remap.fresh(Space::Instance)
    }

    /// An instance standing in for member `member` as argument `arg` of an
    /// instantiation of `module`: what that module imports from it, taken
    /// from the merged instance.
    fn forward(&mut self, module: u32, arg: &str, member: u32) -> Result<u32, RelinkError> {
        let bytes = self
            .level
            .module_bytes(module)
            .ok_or(RelinkError::Unsupported(
                "an outer module importing a merged instance",
            ))?;
        let merged = self.merged()?;
        let mut items = Vec::new();
        for (from, name, kind) in merge::imports(bytes)? {
            if from == arg {
                let export = format!("{}{name}", Plan::prefix(member));
                let index = self.alias_export(merged, kind, &export);
                items.push((name, kind, index));
            }
        }
        Ok(self.bundle(&items))
    }

    /// The merged module's instance, with its imports bundled.
    fn merged_instance(&mut self, plan: &Plan) -> Result<(), RelinkError> {
        let mut items = Vec::new();
        for (n, (origin, kind)) in plan.externals.iter().enumerate() {
            let index = match origin {
                Origin::Item { space, index } => self.remap.get(*space, *index)?,
                Origin::Export { instance, name } => {
                    let instance = self.remap.get(Space::Instance, *instance)?;
                    self.alias_export(instance, *kind, name)
                }
            };
            items.push((n.to_string(), *kind, index));
        }
        let imports = self.bundle(&items);
        let mut section = enc::InstanceSection::new();
        section.instantiate(
            plan.module,
            [(EXTERNAL_MODULE, enc::ModuleArg::Instance(imports))],
        );
        self.out.section(&section);
        self.merged = Some(self.remap.fresh(Space::Instance));
        Ok(())
    }
}

/// Old core indices to new ones, as definitions are written.
#[derive(Default)]
struct Remap {
    maps: HashMap<Space, Vec<Option<u32>>>,
    next: HashMap<Space, u32>,
    /// An error from a rewrite that cannot return one.
    error: Option<RelinkError>,
}

impl Remap {
    fn fresh(&mut self, space: Space) -> u32 {
        let next = self.next.entry(space).or_default();
        *next += 1;
        *next - 1
    }

    fn define(&mut self, space: Space, old: u32) {
        let new = self.fresh(space);
        let map = self.maps.entry(space).or_default();
        if map.len() <= old as usize {
            map.resize(old as usize + 1, None);
        }
        map[old as usize] = Some(new);
    }

    fn get(&self, space: Space, old: u32) -> Result<u32, RelinkError> {
        self.maps
            .get(&space)
            .and_then(|map| map.get(old as usize).copied().flatten())
            .ok_or(RelinkError::Malformed(
                "a reference to an item not defined before it",
            ))
    }

    fn lookup(&self, space: Space, old: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.get(space, old).map_err(ReencodeError::UserError)
    }
}

impl Reencode for Remap {
    type Error = RelinkError;

    fn function_index(&mut self, f: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.lookup(Space::Func, f)
    }
    fn table_index(&mut self, t: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.lookup(Space::Table, t)
    }
    fn memory_index(&mut self, m: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.lookup(Space::Memory, m)
    }
    fn global_index(&mut self, g: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.lookup(Space::Global, g)
    }
    fn tag_index(&mut self, t: u32) -> Result<u32, ReencodeError<RelinkError>> {
        self.lookup(Space::Tag, t)
    }
}

impl ReencodeComponent for Remap {
    fn instance_index(&mut self, i: u32) -> u32 {
        match self.get(Space::Instance, i) {
            Ok(index) => index,
            Err(error) => {
                self.error.get_or_insert(error);
                0
            }
        }
    }
}
