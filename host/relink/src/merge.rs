//! Merging core modules that a component links at instantiation time into
//! one module, whose function table is then defined in the module that fills
//! it, at constant offsets.

use std::collections::HashMap;

use wasm_encoder as enc;
use wasm_encoder::reencode::Reencode;

use crate::RelinkError;

mod parsed;
mod rewrite;

use parsed::parse;
pub(crate) use parsed::{Kind, Summary, imports, summary};
use rewrite::{Map, add_data, add_element, rewriter};

/// Where one import of a member comes from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// Export `name` of an earlier member.
    Member { member: usize, name: String },
    /// The merged module's external import number `n`.
    External(usize),
}

/// One module to merge, in instantiation order.
pub(crate) struct Member<'a> {
    /// The module's bytes.
    pub bytes: &'a [u8],
    /// Where each of its imports comes from, in import order.
    pub sources: Vec<Source>,
    /// Put before each of its export names in the merged module.
    pub prefix: String,
}

/// The module name of the merged module's external imports; each is named
/// by its number.
pub(crate) const EXTERNAL_MODULE: &str = "x";

/// The merged module of `members`, with `externals` imports (each declared
/// like the first member import that names it), and each member's exports
/// under its prefix.
pub(crate) fn merge(members: &[Member<'_>], externals: usize) -> Result<Vec<u8>, RelinkError> {
    let parsed = members
        .iter()
        .map(|m| parse(m.bytes))
        .collect::<Result<Vec<_>, _>>()?;
    if parsed.iter().any(|p| p.start_or_tags) {
        return Err(RelinkError::Unsupported("start functions or tags"));
    }

    // The external imports: their kind, and the member import declaring them.
    let mut declared: Vec<Option<(usize, usize)>> = vec![None; externals];
    for (m, member) in members.iter().enumerate() {
        if member.sources.len() != parsed[m].imports.len() {
            return Err(RelinkError::Malformed(
                "a member's imports and sources differ",
            ));
        }
        for (i, source) in member.sources.iter().enumerate() {
            if let Source::External(n) = source {
                let slot = declared
                    .get_mut(*n)
                    .ok_or(RelinkError::Malformed("an external out of range"))?;
                slot.get_or_insert((m, i));
            }
        }
    }
    let mut external_index = Vec::with_capacity(externals);
    let mut imported = HashMap::<Kind, u32>::new();
    for slot in &declared {
        let (m, i) = slot.ok_or(RelinkError::Malformed("an external no member imports"))?;
        let kind = Kind::of_import(&parsed[m].imports[i].ty)?;
        let next = imported.entry(kind).or_default();
        external_index.push((kind, *next));
        *next += 1;
    }

    // Every member's index maps, in instantiation order.
    let mut maps: Vec<Map> = Vec::with_capacity(members.len());
    let mut next = imported.clone();
    let (mut types, mut elems, mut datas) = (0u32, 0u32, 0u32);
    for (m, member) in members.iter().enumerate() {
        let p = &parsed[m];
        let mut map = Map {
            type_offset: types,
            elem_offset: elems,
            data_offset: datas,
            ..Map::default()
        };
        for (import, source) in p.imports.iter().zip(&member.sources) {
            let kind = Kind::of_import(&import.ty)?;
            let merged = match source {
                Source::External(n) => {
                    let (ext_kind, index) = external_index[*n];
                    if ext_kind != kind {
                        return Err(RelinkError::Malformed("an external of two kinds"));
                    }
                    index
                }
                Source::Member { member: j, name } => {
                    let (j_parsed, j_map) = match (parsed.get(*j), maps.get(*j)) {
                        (Some(p), Some(map)) => (p, map),
                        _ => return Err(RelinkError::Malformed("an import from a later member")),
                    };
                    let export = j_parsed
                        .exports
                        .iter()
                        .find(|e| e.name == name)
                        .ok_or(RelinkError::Malformed("an import of a missing export"))?;
                    if Kind::of_export(export.kind)? != kind {
                        return Err(RelinkError::Malformed("an import of another kind"));
                    }
                    *j_map
                        .of(kind)
                        .get(export.index as usize)
                        .ok_or(RelinkError::Malformed("an export out of range"))?
                }
            };
            map.of_mut(kind).push(merged);
        }
        for (kind, count) in [
            (Kind::Func, p.functions.len()),
            (Kind::Table, p.tables.len()),
            (Kind::Memory, p.memories.len()),
            (Kind::Global, p.globals.len()),
        ] {
            let next = next.entry(kind).or_default();
            for _ in 0..count {
                map.of_mut(kind).push(*next);
                *next += 1;
            }
        }
        types += p.type_count;
        elems += p.elements.len() as u32;
        datas += p.data.len() as u32;
        maps.push(map);
    }

    let imported_globals = imported.get(&Kind::Global).copied().unwrap_or(0);
    let mut constants = HashMap::new();
    let mut module = enc::Module::new();

    let mut type_section = enc::TypeSection::new();
    for (p, map) in parsed.iter().zip(&maps) {
        let mut rw = rewriter(map, &constants, imported_globals);
        for group in &p.rec_groups {
            rw.parse_recursive_type_group(type_section.ty(), group.clone())?;
        }
    }
    module.section(&type_section);

    let mut import_section = enc::ImportSection::new();
    for (n, slot) in declared.iter().enumerate() {
        let (m, i) = slot.expect("checked above");
        let mut rw = rewriter(&maps[m], &constants, imported_globals);
        let ty = rw.entity_type(parsed[m].imports[i].ty)?;
        import_section.import(EXTERNAL_MODULE, &n.to_string(), ty);
    }
    module.section(&import_section);

    let mut functions = enc::FunctionSection::new();
    let mut tables = enc::TableSection::new();
    let mut memories = enc::MemorySection::new();
    let mut globals = enc::GlobalSection::new();
    let mut exports = enc::ExportSection::new();
    let mut elements = enc::ElementSection::new();
    let mut code = enc::CodeSection::new();
    let mut data = enc::DataSection::new();
    for ((p, map), member) in parsed.iter().zip(&maps).zip(members) {
        for ty in &p.functions {
            functions.function(map.type_offset + ty);
        }
        {
            let mut rw = rewriter(map, &constants, imported_globals);
            for table in &p.tables {
                rw.parse_table(&mut tables, table.clone())?;
            }
            for memory in &p.memories {
                memories.memory(rw.memory_type(*memory)?);
            }
        }
        // This member's own globals follow its imported ones in its space.
        let own_globals = &map.globals[p.imports_of(Kind::Global)..];
        for (global, merged_index) in p.globals.iter().zip(own_globals) {
            let mut rw = rewriter(map, &constants, imported_globals);
            let folded = rw.fold(&global.init_expr)?;
            let init = match folded {
                Some(value) => value.expr(),
                None => rw.const_expr(global.init_expr.clone())?,
            };
            globals.global(rw.global_type(global.ty)?, &init);
            if let (Some(value), false) = (folded, global.ty.mutable) {
                constants.insert(*merged_index, value);
            }
        }
        for export in &p.exports {
            let kind = Kind::of_export(export.kind)?;
            let index = *map
                .of(kind)
                .get(export.index as usize)
                .ok_or(RelinkError::Malformed("an export out of range"))?;
            exports.export(
                &format!("{}{}", member.prefix, export.name),
                kind.export_kind(),
                index,
            );
        }
        let mut rw = rewriter(map, &constants, imported_globals);
        for element in &p.elements {
            add_element(&mut rw, &mut elements, element)?;
        }
        for body in &p.code {
            rw.parse_function_body(&mut code, body.clone())?;
        }
        for segment in &p.data {
            add_data(&mut rw, &mut data, segment)?;
        }
    }
    module.section(&functions);
    module.section(&tables);
    module.section(&memories);
    module.section(&globals);
    module.section(&exports);
    module.section(&elements);
    if parsed.iter().any(|p| p.data_count) {
        module.section(&enc::DataCountSection { count: datas });
    }
    module.section(&code);
    module.section(&data);
    Ok(module.finish())
}
