//! Reading the parts of a core module that merging rewrites.

use wasm_encoder as enc;
use wasmparser::{ExternalKind, Payload, TypeRef};

use crate::RelinkError;

/// A core item kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Func,
    Table,
    Memory,
    Global,
}

impl Kind {
    pub(super) fn of_import(ty: &TypeRef) -> Result<Self, RelinkError> {
        Ok(match ty {
            TypeRef::Func(_) | TypeRef::FuncExact(_) => Kind::Func,
            TypeRef::Table(_) => Kind::Table,
            TypeRef::Memory(_) => Kind::Memory,
            TypeRef::Global(_) => Kind::Global,
            TypeRef::Tag(_) => return Err(RelinkError::Unsupported("tags")),
        })
    }

    pub(super) fn of_export(kind: ExternalKind) -> Result<Self, RelinkError> {
        Ok(match kind {
            ExternalKind::Func | ExternalKind::FuncExact => Kind::Func,
            ExternalKind::Table => Kind::Table,
            ExternalKind::Memory => Kind::Memory,
            ExternalKind::Global => Kind::Global,
            ExternalKind::Tag => return Err(RelinkError::Unsupported("tags")),
        })
    }

    pub(crate) fn export_kind(self) -> enc::ExportKind {
        match self {
            Kind::Func => enc::ExportKind::Func,
            Kind::Table => enc::ExportKind::Table,
            Kind::Memory => enc::ExportKind::Memory,
            Kind::Global => enc::ExportKind::Global,
        }
    }
}

/// The parts of one member module.
#[derive(Default)]
pub(super) struct Parsed<'a> {
    pub(super) rec_groups: Vec<wasmparser::RecGroup>,
    pub(super) type_count: u32,
    pub(super) imports: Vec<wasmparser::Import<'a>>,
    pub(super) functions: Vec<u32>,
    pub(super) tables: Vec<wasmparser::Table<'a>>,
    pub(super) memories: Vec<wasmparser::MemoryType>,
    pub(super) globals: Vec<wasmparser::Global<'a>>,
    pub(super) exports: Vec<wasmparser::Export<'a>>,
    pub(super) elements: Vec<wasmparser::Element<'a>>,
    pub(super) data: Vec<wasmparser::Data<'a>>,
    pub(super) code: Vec<wasmparser::FunctionBody<'a>>,
    pub(super) data_count: bool,
    /// Whether it has a start function or tags, which merging does not handle.
    pub(super) start_or_tags: bool,
}

/// Whether a module has what merging does not handle: a start function
/// (which would run at another time merged) or tags.
pub(crate) fn unmergeable(bytes: &[u8]) -> Result<bool, RelinkError> {
    Ok(parse(bytes)?.start_or_tags)
}

/// The imports of a module: module name, field name, kind.
pub(crate) fn imports(bytes: &[u8]) -> Result<Vec<(String, String, Kind)>, RelinkError> {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let Payload::ImportSection(reader) = payload? {
            for import in reader.into_imports() {
                let import = import?;
                out.push((
                    import.module.to_owned(),
                    import.name.to_owned(),
                    Kind::of_import(&import.ty)?,
                ));
            }
        }
    }
    Ok(out)
}

/// Whether a module defines a table and exports it.
pub(crate) fn exported_tables(bytes: &[u8]) -> Result<Vec<String>, RelinkError> {
    let parsed = parse(bytes)?;
    let imported = parsed
        .imports
        .iter()
        .filter(|i| matches!(i.ty, TypeRef::Table(_)))
        .count() as u32;
    Ok(parsed
        .exports
        .iter()
        .filter(|e| e.kind == ExternalKind::Table && e.index >= imported)
        .map(|e| e.name.to_owned())
        .collect())
}

pub(super) fn parse(bytes: &[u8]) -> Result<Parsed<'_>, RelinkError> {
    let mut parsed = Parsed::default();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::TypeSection(reader) => {
                for group in reader {
                    let group = group?;
                    parsed.type_count += group.types().len() as u32;
                    parsed.rec_groups.push(group);
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import?;
                    if matches!(import.ty, TypeRef::Tag(_)) {
                        parsed.start_or_tags = true;
                    }
                    parsed.imports.push(import);
                }
            }
            Payload::FunctionSection(reader) => {
                for ty in reader {
                    parsed.functions.push(ty?);
                }
            }
            Payload::TableSection(reader) => {
                for table in reader {
                    parsed.tables.push(table?);
                }
            }
            Payload::MemorySection(reader) => {
                for memory in reader {
                    parsed.memories.push(memory?);
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    parsed.globals.push(global?);
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    parsed.exports.push(export?);
                }
            }
            Payload::ElementSection(reader) => {
                for element in reader {
                    parsed.elements.push(element?);
                }
            }
            Payload::DataSection(reader) => {
                for data in reader {
                    parsed.data.push(data?);
                }
            }
            Payload::DataCountSection { .. } => parsed.data_count = true,
            Payload::CodeSectionEntry(body) => parsed.code.push(body),
            Payload::StartSection { .. } | Payload::TagSection(_) => parsed.start_or_tags = true,
            _ => {}
        }
    }
    Ok(parsed)
}

impl Parsed<'_> {
    pub(super) fn imports_of(&self, kind: Kind) -> usize {
        self.imports
            .iter()
            .filter(|i| Kind::of_import(&i.ty).ok() == Some(kind))
            .count()
    }
}
