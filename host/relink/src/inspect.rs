//! What the engine does for a component on every instantiation, read from
//! its bytes.

use wasmparser::{ElementItems, ElementKind, Encoding, Payload, TypeRef};

use crate::RelinkError;

/// How many function-table entries the engine fills one by one on every
/// instantiation of `component`: the elements of active segments written
/// into a table the module imports, summed over every core module (nested
/// ones too). A module filling a table it defines, at constant offsets, has
/// it filled lazily instead, as entries are called.
pub fn eagerly_filled_table_entries(component: &[u8]) -> Result<u64, RelinkError> {
    // Per open module or component: the tables a module imports.
    let mut imported_tables: Vec<Option<u32>> = Vec::new();
    let mut total = 0;
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        match payload? {
            Payload::Version { encoding, .. } => imported_tables.push(match encoding {
                Encoding::Module => Some(0),
                Encoding::Component => None,
            }),
            Payload::End(_) => {
                imported_tables.pop();
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if let (TypeRef::Table(_), Some(Some(count))) =
                        (import?.ty, imported_tables.last_mut())
                    {
                        *count += 1;
                    }
                }
            }
            Payload::ElementSection(reader) => {
                let imported = imported_tables.last().copied().flatten().unwrap_or(0);
                for element in reader {
                    let element = element?;
                    if let ElementKind::Active { table_index, .. } = element.kind
                        && table_index.unwrap_or(0) < imported
                    {
                        total += u64::from(match &element.items {
                            ElementItems::Functions(items) => items.count(),
                            ElementItems::Expressions(_, items) => items.count(),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(total)
}
