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
    /// Whether it has a start function.
    pub(super) start: bool,
}

/// What choosing the modules to merge needs to know of one module.
pub(crate) struct Summary {
    /// Its imports: module name, field name, kind.
    pub imports: Vec<(String, String, Kind)>,
    /// The tables it defines and exports, by export name.
    pub exported_tables: Vec<String>,
    /// Whether it has what merging does not handle: a start function (which
    /// would run at another moment merged) or tags.
    pub unmergeable: bool,
    /// Whether instantiating it runs code (a start function).
    pub start: bool,
    /// The imported tables and memories its active segments write to when
    /// it is instantiated, by import module and name.
    pub writes: Vec<(String, String)>,
}

/// The summary of a module, or `None` when it imports tags (not handled).
pub(crate) fn summary(bytes: &[u8]) -> Result<Option<Summary>, RelinkError> {
    let parsed = parse(bytes)?;
    let mut imports = Vec::new();
    let (mut tables, mut memories) = (Vec::new(), Vec::new());
    for import in &parsed.imports {
        let kind = match Kind::of_import(&import.ty) {
            Ok(kind) => kind,
            Err(_) => return Ok(None),
        };
        let name = (import.module.to_owned(), import.name.to_owned());
        match kind {
            Kind::Table => tables.push(name.clone()),
            Kind::Memory => memories.push(name.clone()),
            _ => {}
        }
        imports.push((name.0, name.1, kind));
    }
    let mut writes = Vec::new();
    for element in &parsed.elements {
        if let wasmparser::ElementKind::Active { table_index, .. } = element.kind
            && let Some(name) = tables.get(table_index.unwrap_or(0) as usize)
        {
            writes.push(name.clone());
        }
    }
    for data in &parsed.data {
        if let wasmparser::DataKind::Active { memory_index, .. } = data.kind
            && let Some(name) = memories.get(memory_index as usize)
        {
            writes.push(name.clone());
        }
    }
    let imported_tables = tables.len() as u32;
    Ok(Some(Summary {
        imports,
        exported_tables: parsed
            .exports
            .iter()
            .filter(|e| e.kind == ExternalKind::Table && e.index >= imported_tables)
            .map(|e| e.name.to_owned())
            .collect(),
        unmergeable: parsed.start_or_tags,
        start: parsed.start,
        writes,
    }))
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
            Payload::StartSection { .. } => {
                parsed.start = true;
                parsed.start_or_tags = true;
            }
            Payload::TagSection(_) => parsed.start_or_tags = true,
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
