//! Rewriting one member's indices into the merged module's, folding
//! integer constant expressions on the way.

use std::borrow::Cow;
use std::collections::HashMap;

use wasm_encoder as enc;
use wasm_encoder::reencode::{Error as ReencodeError, Reencode};
use wasmparser::{DataKind, ElementItems, ElementKind, Operator};

use super::Kind;
use crate::RelinkError;

/// A constant an integer constant expression folds to.
#[derive(Clone, Copy, Debug)]
pub(super) enum Value {
    I32(i32),
    I64(i64),
}

impl Value {
    pub(super) fn expr(self) -> enc::ConstExpr {
        match self {
            Value::I32(v) => enc::ConstExpr::i32_const(v),
            Value::I64(v) => enc::ConstExpr::i64_const(v),
        }
    }
}

/// How one member's indices map into the merged module.
#[derive(Default)]
pub(super) struct Map {
    pub(super) type_offset: u32,
    pub(super) funcs: Vec<u32>,
    pub(super) tables: Vec<u32>,
    pub(super) memories: Vec<u32>,
    pub(super) globals: Vec<u32>,
    pub(super) elem_offset: u32,
    pub(super) data_offset: u32,
}

impl Map {
    pub(super) fn of(&self, kind: Kind) -> &Vec<u32> {
        match kind {
            Kind::Func => &self.funcs,
            Kind::Table => &self.tables,
            Kind::Memory => &self.memories,
            Kind::Global => &self.globals,
        }
    }

    pub(super) fn of_mut(&mut self, kind: Kind) -> &mut Vec<u32> {
        match kind {
            Kind::Func => &mut self.funcs,
            Kind::Table => &mut self.tables,
            Kind::Memory => &mut self.memories,
            Kind::Global => &mut self.globals,
        }
    }
}

/// Rewrites one member's indices; integer constant expressions are folded
/// with the values of the immutable globals merged so far.
pub(super) struct Rewriter<'m> {
    map: &'m Map,
    /// The values of the merged module's immutable globals, where known.
    constants: &'m HashMap<u32, Value>,
    /// How many globals the merged module imports.
    imported_globals: u32,
}

fn index(list: &[u32], i: u32) -> Result<u32, ReencodeError<RelinkError>> {
    list.get(i as usize)
        .copied()
        .ok_or(ReencodeError::UserError(RelinkError::Malformed(
            "an index out of range",
        )))
}

impl Reencode for Rewriter<'_> {
    type Error = RelinkError;

    fn type_index(&mut self, ty: u32) -> Result<u32, ReencodeError<RelinkError>> {
        Ok(self.map.type_offset + ty)
    }
    fn function_index(&mut self, f: u32) -> Result<u32, ReencodeError<RelinkError>> {
        index(&self.map.funcs, f)
    }
    fn table_index(&mut self, t: u32) -> Result<u32, ReencodeError<RelinkError>> {
        index(&self.map.tables, t)
    }
    fn memory_index(&mut self, m: u32) -> Result<u32, ReencodeError<RelinkError>> {
        index(&self.map.memories, m)
    }
    fn global_index(&mut self, g: u32) -> Result<u32, ReencodeError<RelinkError>> {
        index(&self.map.globals, g)
    }
    fn element_index(&mut self, e: u32) -> Result<u32, ReencodeError<RelinkError>> {
        Ok(self.map.elem_offset + e)
    }
    fn data_index(&mut self, d: u32) -> Result<u32, ReencodeError<RelinkError>> {
        Ok(self.map.data_offset + d)
    }
    fn tag_index(&mut self, _: u32) -> Result<u32, ReencodeError<RelinkError>> {
        Err(ReencodeError::UserError(RelinkError::Unsupported("tags")))
    }

    fn const_expr(
        &mut self,
        expr: wasmparser::ConstExpr,
    ) -> Result<enc::ConstExpr, ReencodeError<RelinkError>> {
        if let Some(value) = self.fold(&expr)? {
            return Ok(value.expr());
        }
        // Not an integer: kept, as long as it reads no global the merge
        // turned from an import into a definition.
        let mut reader = expr.get_operators_reader();
        while !reader.eof() {
            if let Operator::GlobalGet { global_index } = reader.read()?
                && self.global_index(global_index)? >= self.imported_globals
            {
                return Err(ReencodeError::UserError(RelinkError::Unsupported(
                    "a constant expression reading a merged global",
                )));
            }
        }
        wasm_encoder::reencode::utils::const_expr(self, expr)
    }
}

impl Rewriter<'_> {
    /// The integer `expr` computes, when it reads only constants.
    pub(super) fn fold(
        &mut self,
        expr: &wasmparser::ConstExpr,
    ) -> Result<Option<Value>, ReencodeError<RelinkError>> {
        let mut stack = Vec::new();
        let mut reader = expr.get_operators_reader();
        while !reader.eof() {
            let value = match reader.read()? {
                Operator::I32Const { value } => Value::I32(value),
                Operator::I64Const { value } => Value::I64(value),
                Operator::GlobalGet { global_index } => {
                    match self.constants.get(&self.global_index(global_index)?) {
                        Some(value) => *value,
                        None => return Ok(None),
                    }
                }
                Operator::End => break,
                op => {
                    let (Some(b), Some(a)) = (stack.pop(), stack.pop()) else {
                        return Ok(None);
                    };
                    match (op, a, b) {
                        (Operator::I32Add, Value::I32(a), Value::I32(b)) => {
                            Value::I32(a.wrapping_add(b))
                        }
                        (Operator::I32Sub, Value::I32(a), Value::I32(b)) => {
                            Value::I32(a.wrapping_sub(b))
                        }
                        (Operator::I32Mul, Value::I32(a), Value::I32(b)) => {
                            Value::I32(a.wrapping_mul(b))
                        }
                        (Operator::I64Add, Value::I64(a), Value::I64(b)) => {
                            Value::I64(a.wrapping_add(b))
                        }
                        (Operator::I64Sub, Value::I64(a), Value::I64(b)) => {
                            Value::I64(a.wrapping_sub(b))
                        }
                        (Operator::I64Mul, Value::I64(a), Value::I64(b)) => {
                            Value::I64(a.wrapping_mul(b))
                        }
                        _ => return Ok(None),
                    }
                }
            };
            stack.push(value);
        }
        Ok(match stack.as_slice() {
            [value] => Some(*value),
            _ => None,
        })
    }
}

pub(super) fn rewriter<'m>(
    map: &'m Map,
    constants: &'m HashMap<u32, Value>,
    imported_globals: u32,
) -> Rewriter<'m> {
    Rewriter {
        map,
        constants,
        imported_globals,
    }
}

/// Adds `element`, rewritten, with an active segment's offset folded to a
/// constant (what lets the engine fill the table lazily).
pub(super) fn add_element(
    rw: &mut Rewriter<'_>,
    section: &mut enc::ElementSection,
    element: &wasmparser::Element<'_>,
) -> Result<(), RelinkError> {
    let items = match element.items.clone() {
        ElementItems::Functions(reader) => {
            let mut funcs = Vec::new();
            for f in reader {
                funcs.push(rw.function_index(f?)?);
            }
            enc::Elements::Functions(Cow::Owned(funcs))
        }
        ElementItems::Expressions(ty, reader) => {
            let mut exprs = Vec::new();
            for expr in reader {
                exprs.push(rw.const_expr(expr?)?);
            }
            enc::Elements::Expressions(rw.ref_type(ty)?, Cow::Owned(exprs))
        }
    };
    match &element.kind {
        ElementKind::Passive => {
            section.passive(items);
        }
        ElementKind::Declared => {
            section.declared(items);
        }
        ElementKind::Active {
            table_index,
            offset_expr,
        } => {
            let offset = constant_offset(rw, offset_expr, "a table offset not constant")?;
            let table = rw.table_index(table_index.unwrap_or(0))?;
            section.active(Some(table), &offset, items);
        }
    }
    Ok(())
}

/// Adds data segment `segment`, rewritten, with an active one's offset
/// folded to a constant (what keeps the memory's image a static one).
pub(super) fn add_data(
    rw: &mut Rewriter<'_>,
    section: &mut enc::DataSection,
    segment: &wasmparser::Data<'_>,
) -> Result<(), RelinkError> {
    match &segment.kind {
        DataKind::Passive => {
            section.passive(segment.data.iter().copied());
        }
        DataKind::Active {
            memory_index,
            offset_expr,
        } => {
            let offset = constant_offset(rw, offset_expr, "a data offset not constant")?;
            let memory = rw.memory_index(*memory_index)?;
            section.active(memory, &offset, segment.data.iter().copied());
        }
    }
    Ok(())
}

/// An active segment's offset as a constant, or `unsupported`.
fn constant_offset(
    rw: &mut Rewriter<'_>,
    offset: &wasmparser::ConstExpr<'_>,
    unsupported: &'static str,
) -> Result<enc::ConstExpr, RelinkError> {
    match rw.fold(offset)? {
        Some(value) => Ok(value.expr()),
        None => Err(RelinkError::Unsupported(unsupported)),
    }
}
