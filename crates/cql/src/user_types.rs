//! User-defined types: resolving the parser's type references against a
//! keyspace's definitions, and CREATE/ALTER/DROP TYPE.
//!
//! A keyspace's types and every column type in its tables are kept fully
//! resolved (nested user types carry their fields), so values can be
//! validated and described without a schema lookup. After any type change
//! the whole keyspace is re-resolved from the definitions by name, which
//! also refuses definitions that would refer to themselves.

use std::collections::BTreeMap;
use std::sync::Arc;

use shoal_schema::{CqlType, KeyspaceMeta, TableMeta, UserType};

use crate::ast::{AlterType, AlterTypeOp, CreateType, DropType};
use crate::error::{invalid, CqlResult};

/// Type names that CQL reserves for its own types.
const RESERVED: [&str; 6] = ["frozen", "list", "set", "map", "tuple", "byte"];

/// `ty` with every user type reference replaced by `keyspace`'s definition.
pub fn resolve(ty: &CqlType, keyspace: &KeyspaceMeta) -> CqlResult<CqlType> {
    resolve_in(ty, &keyspace.name, &keyspace.types, &mut Vec::new())
}

/// `stack` holds the types being resolved around this one, to catch cycles.
fn resolve_in(
    ty: &CqlType,
    keyspace: &str,
    types: &BTreeMap<String, Arc<UserType>>,
    stack: &mut Vec<String>,
) -> CqlResult<CqlType> {
    let mut go = |t: &CqlType| resolve_in(t, keyspace, types, stack).map(Box::new);
    Ok(match ty {
        CqlType::Udt(reference) => return resolve_udt(reference, keyspace, types, stack),
        CqlType::List(e) => CqlType::List(go(e)?),
        CqlType::Set(e) => CqlType::Set(go(e)?),
        CqlType::Frozen(e) => CqlType::Frozen(go(e)?),
        CqlType::Map(k, v) => CqlType::Map(go(k)?, go(v)?),
        CqlType::Vector(e, dimension) => CqlType::Vector(go(e)?, *dimension),
        CqlType::Tuple(fields) => {
            CqlType::Tuple(fields.iter().map(|f| resolve_in(f, keyspace, types, stack)).collect::<CqlResult<_>>()?)
        }
        native => native.clone(),
    })
}

fn resolve_udt(
    reference: &UserType,
    keyspace: &str,
    types: &BTreeMap<String, Arc<UserType>>,
    stack: &mut Vec<String>,
) -> CqlResult<CqlType> {
    if !reference.keyspace.is_empty() && reference.keyspace != keyspace {
        return Err(invalid(format!(
            "Statement on keyspace {keyspace} cannot refer to a user type in keyspace {}; user types can only be used in the keyspace they are defined in",
            reference.keyspace
        )));
    }
    let name = &reference.name;
    let definition = types.get(name).ok_or_else(|| invalid(format!("Unknown type {keyspace}.{name}")))?;
    if stack.contains(name) {
        return Err(invalid(format!("Type {keyspace}.{name} cannot refer to itself, directly or through other types")));
    }
    stack.push(name.clone());
    let fields = definition
        .fields
        .iter()
        .map(|(field, ty)| Ok((field.clone(), resolve_in(ty, keyspace, types, stack)?)))
        .collect::<CqlResult<Vec<_>>>();
    stack.pop();
    Ok(CqlType::Udt(Arc::new(UserType { keyspace: keyspace.to_string(), name: name.clone(), fields: fields? })))
}

/// Re-resolves every type and table column of `keyspace` from the type
/// definitions, after one of them changed.
fn refresh(keyspace: &mut KeyspaceMeta) -> CqlResult<()> {
    let mut types = BTreeMap::new();
    for name in keyspace.types.keys() {
        let reference = UserType::reference(None, name.clone());
        if let CqlType::Udt(resolved) = resolve_in(&reference, &keyspace.name, &keyspace.types, &mut Vec::new())? {
            types.insert(name.clone(), resolved);
        }
    }
    keyspace.types = types;
    let mut tables = BTreeMap::new();
    for (name, table) in &keyspace.tables {
        let mut table = TableMeta::clone(table);
        for column in &mut table.columns {
            column.ty = resolve(&column.ty, keyspace)?;
        }
        tables.insert(name.clone(), Arc::new(table));
    }
    keyspace.tables = tables;
    Ok(())
}

/// A field's type as stored: resolved, checked and frozen inside as a
/// column's is. A value of the type is always stored whole.
fn field_type(ty: &CqlType, keyspace: &KeyspaceMeta, field: &str) -> CqlResult<CqlType> {
    if ty.is_counter() {
        return Err(invalid(format!("A user type cannot contain counters (field {field})")));
    }
    if matches!(ty, CqlType::Udt(_)) {
        return Err(invalid(format!("A user type cannot contain non-frozen UDTs (field {field} of type {ty})")));
    }
    crate::ddl::stored_type(&resolve(ty, keyspace)?)
}

/// Applies CREATE TYPE to `keyspace`; `false` when `IF NOT EXISTS` made it a no-op.
pub fn create(keyspace: &mut KeyspaceMeta, s: &CreateType) -> CqlResult<bool> {
    if keyspace.types.contains_key(&s.name) {
        if s.if_not_exists {
            return Ok(false);
        }
        return Err(invalid(format!("A user type with name '{}' already exists", s.name)));
    }
    if CqlType::native(&s.name).is_some() || RESERVED.contains(&s.name.as_str()) {
        return Err(invalid(format!("Type name '{}' is reserved", s.name)));
    }
    // Unlike table names (directory names in Cassandra), a type's name
    // may be any quoted identifier, as in ScyllaDB.
    let mut fields: Vec<(String, CqlType)> = Vec::new();
    for (name, ty) in &s.fields {
        if fields.iter().any(|(n, _)| n == name) {
            return Err(invalid(format!("Duplicate field name {name} in type {}", s.name)));
        }
        fields.push((name.clone(), field_type(ty, keyspace, name)?));
    }
    let definition = UserType { keyspace: keyspace.name.clone(), name: s.name.clone(), fields };
    keyspace.types.insert(s.name.clone(), Arc::new(definition));
    Ok(true)
}

pub fn alter(keyspace: &mut KeyspaceMeta, s: &AlterType) -> CqlResult<()> {
    let full = format!("{}.{}", keyspace.name, s.name);
    let current = keyspace.types.get(&s.name).ok_or_else(|| invalid(format!("Unknown type {full}")))?;
    let mut definition = UserType::clone(current);
    match &s.op {
        AlterTypeOp::Add(field, ty) => {
            if definition.field_index(field).is_some() {
                return Err(invalid(format!(
                    "Cannot add new field {field} to type {full}: a field of the same name already exists"
                )));
            }
            let ty = field_type(ty, keyspace, field)?;
            if ty.mentions_udt(&keyspace.name, &s.name) {
                return Err(invalid(format!(
                    "Cannot add new field {field} of type {ty} to user type {full} as this would create a circular reference"
                )));
            }
            check_not_in_partition_key(keyspace, &s.name, &full)?;
            definition.fields.push((field.clone(), ty));
        }
        AlterTypeOp::Rename(pairs) => {
            for (from, to) in pairs {
                let index = definition
                    .field_index(from)
                    .ok_or_else(|| invalid(format!("Unknown field {from} in type {full}")))?;
                if definition.field_index(to).is_some() {
                    return Err(invalid(format!("Duplicate field name {to} in type {full}")));
                }
                definition.fields[index].0 = to.clone();
            }
        }
    }
    keyspace.types.insert(s.name.clone(), Arc::new(definition));
    refresh(keyspace)
}

/// A field added to a type in a partition key would change the key's
/// serialized form, and with it every partition's token (ScyllaDB refuses it).
fn check_not_in_partition_key(keyspace: &KeyspaceMeta, name: &str, full: &str) -> CqlResult<()> {
    for table in keyspace.tables.values() {
        if let Some(column) = table.partition_key().find(|c| c.ty.mentions_udt(&keyspace.name, name)) {
            return Err(invalid(format!(
                "Cannot add new field to type {full} because it is used in the partition key column {} of table {}.{}",
                column.name, keyspace.name, table.name
            )));
        }
    }
    Ok(())
}

/// Applies DROP TYPE; `false` when `IF EXISTS` made it a no-op.
pub fn drop(keyspace: &mut KeyspaceMeta, s: &DropType) -> CqlResult<bool> {
    let full = format!("{}.{}", keyspace.name, s.name);
    if !keyspace.types.contains_key(&s.name) {
        if s.if_exists {
            return Ok(false);
        }
        return Err(invalid(format!("Type {full} doesn't exist")));
    }
    let uses = |ty: &CqlType| ty.mentions_udt(&keyspace.name, &s.name);
    if let Some(other) = keyspace.types.values().find(|t| t.name != s.name && t.fields.iter().any(|(_, ty)| uses(ty))) {
        return Err(invalid(format!("Cannot drop user type {full} as it is still used by user type {}", other.name)));
    }
    if let Some(table) = keyspace.tables.values().find(|t| t.columns.iter().any(|c| uses(&c.ty))) {
        return Err(invalid(format!("Cannot drop user type {full} as it is still used by table {}", table.name)));
    }
    keyspace.types.remove(&s.name);
    Ok(true)
}

/// The keyspace's types ordered so each comes after the types it uses, as
/// the schema file needs them to load.
pub fn in_dependency_order(keyspace: &KeyspaceMeta) -> Vec<&Arc<UserType>> {
    let mut ordered: Vec<&Arc<UserType>> = Vec::new();
    let mut left: Vec<&Arc<UserType>> = keyspace.types.values().collect();
    while !left.is_empty() {
        let ready = |t: &&Arc<UserType>| {
            left.iter().all(|other| {
                other.name == t.name || !t.fields.iter().any(|(_, ty)| ty.mentions_udt(&t.keyspace, &other.name))
            })
        };
        let (now, later): (Vec<_>, Vec<_>) = left.iter().copied().partition(|t| ready(t));
        if now.is_empty() {
            // Cycles are refused when types change; keep every type anyway.
            ordered.extend(later);
            break;
        }
        ordered.extend(now);
        left = later;
    }
    ordered
}
