//! One component level, relinked: the instantiations of the modules to merge
//! become one instantiation of the merged module, and every reference to
//! them, or to what they export, moves with them.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use wasmparser::{
    CanonicalFunction, Chunk, ComponentAlias, ComponentExternalKind, Encoding, ExternalKind,
    Instance, Parser, Payload,
};

use crate::merge::{self, Kind, Member, Source};
use crate::{RelinkError, Relinked};

mod emit;
mod select;

/// A core index space of a component.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Space {
    Func,
    Table,
    Memory,
    Global,
    Tag,
    Instance,
}

impl Space {
    fn of(kind: ExternalKind) -> Space {
        match kind {
            ExternalKind::Func | ExternalKind::FuncExact => Space::Func,
            ExternalKind::Table => Space::Table,
            ExternalKind::Memory => Space::Memory,
            ExternalKind::Global => Space::Global,
            ExternalKind::Tag => Space::Tag,
        }
    }

    fn of_kind(kind: Kind) -> Space {
        match kind {
            Kind::Func => Space::Func,
            Kind::Table => Space::Table,
            Kind::Memory => Space::Memory,
            Kind::Global => Space::Global,
        }
    }
}

/// One definition of a component level, in order.
pub(crate) enum Entry<'a> {
    /// A section copied as it is.
    Raw { id: u8, range: Range<usize> },
    /// The `component-name` section, whose indices a relink changes.
    Names { range: Range<usize> },
    /// A nested component, relinked on its own.
    Nested { range: Range<usize> },
    /// A core module.
    Module { index: u32, range: Range<usize> },
    /// A core instance.
    Instance { index: u32, def: Instance<'a> },
    /// An alias, and the core item it defines, if any.
    Alias {
        def: ComponentAlias<'a>,
        defines: Option<(Space, u32)>,
    },
    /// A canonical function, and the core function it defines, if any.
    Canon {
        def: CanonicalFunction,
        defines: Option<(Space, u32)>,
    },
}

/// Where a core item a module imports comes from, in the end.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    /// An export of a module instantiation.
    Export { instance: u32, name: String },
    /// A core function a canonical definition makes.
    Item { space: Space, index: u32 },
}

/// A component level, read.
pub(crate) struct Level<'a> {
    bytes: &'a [u8],
    entries: Vec<Entry<'a>>,
    /// Each module index's bytes (`None`: aliased from an outer component).
    modules: Vec<Option<Range<usize>>>,
    /// Modules some component-level definition refers to.
    modules_elsewhere: HashSet<u32>,
    /// Each core instance index's entry.
    instances: Vec<usize>,
    /// Each core item's entry, per space.
    items: HashMap<Space, Vec<usize>>,
}

/// The modules of the enclosing component that `nested` (or a component
/// inside it) aliases from outside.
fn outer_modules(nested: &[u8]) -> Result<Vec<u32>, RelinkError> {
    let mut out = Vec::new();
    // Per open module or component: whether it is a component.
    let mut open: Vec<bool> = Vec::new();
    for payload in Parser::new(0).parse_all(nested) {
        match payload? {
            Payload::Version { encoding, .. } => open.push(encoding == Encoding::Component),
            Payload::End(_) => {
                open.pop();
            }
            Payload::ComponentAliasSection(reader) => {
                let depth = open.iter().filter(|c| **c).count() as u32;
                for alias in reader {
                    if let ComponentAlias::Outer {
                        kind: wasmparser::ComponentOuterAliasKind::CoreModule,
                        count,
                        index,
                    } = alias?
                        && count == depth
                    {
                        out.push(index);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn usize_range(range: Range<u64>) -> Range<usize> {
    range.start as usize..range.end as usize
}

/// The bytes of a module with nothing in it.
const EMPTY_MODULE: &[u8] = b"\0asm\x01\0\0\0";

/// How deep nested components are relinked; deeper ones are left as they
/// are (the work, and the stack, stay bounded).
const MAX_DEPTH: usize = 16;

pub(crate) fn relink(bytes: &[u8], depth: usize) -> Result<Option<Relinked>, RelinkError> {
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    let level = Level::read(bytes)?;
    let mut nested = HashMap::new();
    let mut merged = 0;
    for entry in &level.entries {
        if let Entry::Nested { range } = entry {
            let inner = bytes
                .get(range.clone())
                .ok_or(RelinkError::Malformed("a nested component past the end"))?;
            if let Some(relinked) = relink(inner, depth + 1)? {
                merged += relinked.merged;
                nested.insert(range.start, relinked.bytes);
            }
        }
    }
    let plan = select::plan(&level)?;
    if plan.is_none() && nested.is_empty() {
        return Ok(None);
    }
    merged += plan.as_ref().map_or(0, |p| p.members.len());
    let bytes = emit::emit(&level, plan.as_ref(), &nested)?;
    Ok(Some(Relinked { bytes, merged }))
}

impl<'a> Level<'a> {
    fn read(bytes: &'a [u8]) -> Result<Self, RelinkError> {
        let mut level = Level {
            bytes,
            entries: Vec::new(),
            modules: Vec::new(),
            modules_elsewhere: HashSet::new(),
            instances: Vec::new(),
            items: HashMap::new(),
        };
        let mut parser = Parser::new(0);
        let mut offset = 0;
        while offset < bytes.len() {
            let (payload, consumed) = match parser.parse(&bytes[offset..], true)? {
                Chunk::Parsed { consumed, payload } => (payload, consumed),
                Chunk::NeedMoreData(_) => return Err(RelinkError::Malformed("truncated")),
            };
            offset += consumed;
            match payload {
                Payload::Version {
                    encoding: Encoding::Component,
                    ..
                } => {}
                Payload::Version { .. } => return Err(RelinkError::Unsupported("a core module")),
                Payload::ModuleSection {
                    unchecked_range, ..
                } => {
                    let range = usize_range(unchecked_range);
                    offset += range.len();
                    level.entries.push(Entry::Module {
                        index: level.modules.len() as u32,
                        range: range.clone(),
                    });
                    level.modules.push(Some(range));
                }
                Payload::ComponentSection {
                    unchecked_range, ..
                } => {
                    let range = usize_range(unchecked_range);
                    offset += range.len();
                    let nested = bytes
                        .get(range.clone())
                        .ok_or(RelinkError::Malformed("a nested component past the end"))?;
                    level.modules_elsewhere.extend(outer_modules(nested)?);
                    level.entries.push(Entry::Nested { range });
                }
                Payload::InstanceSection(reader) => {
                    for def in reader {
                        let index = level.instances.len() as u32;
                        level.instances.push(level.entries.len());
                        level.entries.push(Entry::Instance { index, def: def? });
                    }
                }
                Payload::ComponentAliasSection(reader) => {
                    for def in reader {
                        let def = def?;
                        let defines = match def {
                            ComponentAlias::CoreInstanceExport { kind, .. } => {
                                Some(level.define(Space::of(kind)))
                            }
                            ComponentAlias::Outer {
                                kind: wasmparser::ComponentOuterAliasKind::CoreModule,
                                ..
                            }
                            | ComponentAlias::InstanceExport {
                                kind: ComponentExternalKind::Module,
                                ..
                            } => {
                                level.modules.push(None);
                                None
                            }
                            _ => None,
                        };
                        level.entries.push(Entry::Alias { def, defines });
                    }
                }
                Payload::ComponentCanonicalSection(reader) => {
                    for def in reader {
                        let def = def?;
                        let defines = match def {
                            CanonicalFunction::Lift { .. } => None,
                            _ => Some(level.define(Space::Func)),
                        };
                        level.entries.push(Entry::Canon { def, defines });
                    }
                }
                Payload::ComponentInstanceSection(reader) => {
                    for instance in reader.clone() {
                        let used: Vec<(ComponentExternalKind, u32)> = match instance? {
                            wasmparser::ComponentInstance::Instantiate { args, .. } => {
                                args.iter().map(|a| (a.kind, a.index)).collect()
                            }
                            wasmparser::ComponentInstance::FromExports(exports) => {
                                exports.iter().map(|e| (e.kind, e.index)).collect()
                            }
                        };
                        for (kind, index) in used {
                            if kind == ComponentExternalKind::Module {
                                level.modules_elsewhere.insert(index);
                            }
                        }
                    }
                    level.entries.push(Entry::Raw {
                        id: 5,
                        range: usize_range(reader.range()),
                    });
                }
                Payload::ComponentExportSection(reader) => {
                    for export in reader.clone() {
                        let export = export?;
                        if export.kind == ComponentExternalKind::Module {
                            // An export is also a new index of its kind.
                            level.modules_elsewhere.insert(export.index);
                            level.modules.push(None);
                        }
                    }
                    level.entries.push(Entry::Raw {
                        id: 11,
                        range: usize_range(reader.range()),
                    });
                }
                Payload::ComponentImportSection(reader) => {
                    for import in reader.clone() {
                        if let wasmparser::ComponentTypeRef::Module(_) = import?.ty {
                            level.modules.push(None);
                        }
                    }
                    level.entries.push(Entry::Raw {
                        id: 10,
                        range: usize_range(reader.range()),
                    });
                }
                Payload::CustomSection(reader) if reader.name() == "component-name" => {
                    level.entries.push(Entry::Names {
                        range: usize_range(reader.range()),
                    });
                }
                Payload::End(_) => break,
                other => {
                    if let Some((id, range)) = other.as_section() {
                        level.entries.push(Entry::Raw {
                            id,
                            range: usize_range(range),
                        });
                    }
                }
            }
        }
        Ok(level)
    }

    fn define(&mut self, space: Space) -> (Space, u32) {
        let items = self.items.entry(space).or_default();
        items.push(self.entries.len());
        (space, items.len() as u32 - 1)
    }

    /// The bytes of module `index`, when this level has them.
    fn module_bytes(&self, index: u32) -> Option<&'a [u8]> {
        let range = self.modules.get(index as usize)?.clone()?;
        self.bytes.get(range)
    }

    /// Where import `module` `name` of an instantiation with `args` comes from.
    fn import_origin(
        &self,
        args: &[wasmparser::InstantiationArg<'_>],
        module: &str,
        name: &str,
    ) -> Result<Origin, RelinkError> {
        let arg = args
            .iter()
            .find(|a| a.name == module)
            .ok_or(RelinkError::Malformed("an import no argument provides"))?;
        self.resolve(arg.index, name)
    }

    /// Where export `name` of core instance `instance` comes from.
    fn resolve(&self, instance: u32, name: &str) -> Result<Origin, RelinkError> {
        let pos = *self
            .instances
            .get(instance as usize)
            .ok_or(RelinkError::Malformed("an instance out of range"))?;
        match &self.entries[pos] {
            Entry::Instance {
                def: Instance::Instantiate { .. },
                ..
            } => Ok(Origin::Export {
                instance,
                name: name.to_owned(),
            }),
            Entry::Instance {
                def: Instance::FromExports(exports),
                ..
            } => {
                let export = exports
                    .iter()
                    .find(|e| e.name == name)
                    .ok_or(RelinkError::Malformed("an import no argument provides"))?;
                self.origin_of(Space::of(export.kind), export.index)
            }
            _ => Err(RelinkError::Malformed("an instance that is not one")),
        }
    }

    /// Where core item `index` of `space` comes from.
    fn origin_of(&self, space: Space, index: u32) -> Result<Origin, RelinkError> {
        let pos = *self
            .items
            .get(&space)
            .and_then(|items| items.get(index as usize))
            .ok_or(RelinkError::Malformed("an item out of range"))?;
        match &self.entries[pos] {
            Entry::Alias {
                def:
                    ComponentAlias::CoreInstanceExport {
                        instance_index,
                        name,
                        ..
                    },
                ..
            } => self.resolve(*instance_index, name),
            Entry::Canon { .. } => Ok(Origin::Item { space, index }),
            _ => Err(RelinkError::Malformed("an item that is not one")),
        }
    }
}

/// What a relink of one level does.
pub(crate) struct Plan {
    /// The instances merged, in instantiation order.
    pub members: Vec<u32>,
    /// The module the merged module replaces (the table's definer's).
    pub module: u32,
    /// The other members' modules, emptied.
    pub emptied: HashSet<u32>,
    /// The merged module.
    pub merged: Vec<u8>,
    /// Its imports, by number: where each comes from and its kind.
    pub externals: Vec<(Origin, Kind)>,
    /// Per entry: whether it depends on the members (and so moves after them).
    pub tainted: Vec<bool>,
}

impl Plan {
    fn prefix(instance: u32) -> String {
        format!("{instance}:")
    }

    fn build(
        level: &Level<'_>,
        members: Vec<u32>,
        origins: &HashMap<u32, Vec<(Origin, Kind)>>,
        tainted: Vec<bool>,
    ) -> Result<Plan, RelinkError> {
        let order: HashMap<u32, usize> = members.iter().enumerate().map(|(i, m)| (*m, i)).collect();
        let mut externals: Vec<(Origin, Kind)> = Vec::new();
        let mut numbers: HashMap<Origin, usize> = HashMap::new();
        let mut parts = Vec::new();
        let mut modules = Vec::new();
        for member in &members {
            let (module, _) = level.instantiation(*member)?;
            modules.push(module);
            let bytes = level
                .module_bytes(module)
                .ok_or(RelinkError::Malformed("a member without bytes"))?;
            let mut sources = Vec::new();
            for (origin, kind) in &origins[member] {
                sources.push(match origin {
                    Origin::Export { instance, name } if order.contains_key(instance) => {
                        Source::Member {
                            member: order[instance],
                            name: name.clone(),
                        }
                    }
                    _ => {
                        let n = *numbers.entry(origin.clone()).or_insert_with(|| {
                            externals.push((origin.clone(), *kind));
                            externals.len() - 1
                        });
                        Source::External(n)
                    }
                });
            }
            parts.push(Member {
                bytes,
                sources,
                prefix: Plan::prefix(*member),
            });
        }
        let merged = merge::merge(&parts, externals.len())?;
        Ok(Plan {
            module: modules[0],
            emptied: modules[1..].iter().copied().collect(),
            members,
            merged,
            externals,
            tainted,
        })
    }
}

impl Level<'_> {
    /// The module and arguments of instantiation `instance`.
    fn instantiation(
        &self,
        instance: u32,
    ) -> Result<(u32, &[wasmparser::InstantiationArg<'_>]), RelinkError> {
        match self
            .instances
            .get(instance as usize)
            .map(|pos| &self.entries[*pos])
        {
            Some(Entry::Instance {
                def: Instance::Instantiate { module_index, args },
                ..
            }) => Ok((*module_index, args)),
            _ => Err(RelinkError::Malformed("not an instantiation")),
        }
    }
}
