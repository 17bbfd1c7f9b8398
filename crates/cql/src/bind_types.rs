//! The type and name of every bind marker of a statement, as PREPARE tells
//! drivers (they serialize values by these types), and which markers carry
//! the partition key (drivers compute the token from them to route).

use shoal_schema::{ColumnMeta, CqlType, Schema, TableMeta};

use crate::ast::{
    AlterTableOp, Assignment, Condition, InValues, Operator, Parsed, Relation, Selection, SelectorExpr, Statement,
    Term, Using,
};
use crate::ddl::qualify;
use crate::error::{invalid, CqlError, CqlResult};
use crate::filter_relations::in_marker_name;
use crate::modification::{assignment_column, check_collection_operation, check_element_deletion};
use crate::restrictions::contained_type;
use crate::result::ColumnSpec;

struct Collector<'a> {
    specs: Vec<Option<ColumnSpec>>,
    /// Where a user function a selector calls is looked up.
    schema: &'a Schema,
    meta: Option<&'a TableMeta>,
    keyspace: String,
    table: String,
    /// The first column named that the table lacks: PREPARE refuses it,
    /// as execution would, before a marker gets a made-up type.
    unknown: Option<String>,
    /// The first operation execution would refuse whatever the values
    /// (`l[?] = ?` on a frozen list): PREPARE refuses it too.
    refused: Option<CqlError>,
}

impl Collector<'_> {
    fn mark(&mut self, index: usize, name: &str, ty: &CqlType) {
        if let Some(slot) = self.specs.get_mut(index) {
            if slot.is_none() {
                *slot = Some(ColumnSpec {
                    keyspace: self.keyspace.clone(),
                    table: self.table.clone(),
                    name: name.to_string(),
                    ty: ty.clone(),
                });
            }
        }
    }

    /// Walks `term` received by `name` of type `ty`, marking its markers.
    fn term(&mut self, term: &Term, name: &str, ty: &CqlType) {
        let ty = ty.unfrozen();
        match term {
            Term::Bind(i) => self.mark(*i, name, ty),
            Term::List(items) | Term::Set(items) => {
                if let CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) = ty {
                    items.iter().for_each(|t| self.term(t, name, e));
                }
            }
            Term::Map(entries) => {
                if let CqlType::Map(k, v) = ty {
                    for (key, value) in entries {
                        self.term(key, name, k);
                        self.term(value, name, v);
                    }
                }
            }
            Term::Tuple(items) => {
                if let CqlType::Tuple(fields) = ty {
                    items.iter().zip(fields).for_each(|(t, f)| self.term(t, name, f));
                }
            }
            Term::UserType(fields) => {
                if let CqlType::Udt(udt) = ty {
                    for (field, term) in fields {
                        if let Some((_, field_ty)) = udt.fields.iter().find(|(n, _)| n == field) {
                            self.term(term, &format!("{name}.{field}"), field_ty);
                        }
                    }
                }
            }
            Term::Cast { ty, term } => self.term(term, name, ty),
            Term::CastAs { term, ty } => {
                match crate::term_casts::source_type(term, ty, crate::functions::call_result_type) {
                    Ok(from) => self.term(term, &crate::term_casts::argument_name(ty), &from),
                    Err(e) => {
                        self.refused.get_or_insert(e);
                    }
                }
            }
            Term::FunctionCall { name: function, args } => {
                // fromJson takes JSON text; a function of one signature
                // its parameters' types (blobAsInt(?) a blob); a bare
                // marker given to a time conversion of several signatures
                // is ambiguous (`toDate(?)`, Cassandra's refusal).
                // Each marker is named as Cassandra names a function's
                // argument, `arg0(system.blobasint)`: not the column, so a
                // driver does not take it for a key column to route by.
                // A user function's markers take its parameters' types
                // (of its one overload of that arity).
                let callees = crate::functions::may_name_user_function(function)
                    .then(|| crate::user_functions::candidates(self.schema, &self.keyspace, function, args.len()));
                if let Some(Ok(callees)) = callees {
                    if let [crate::user_functions::Callee::Function(f)] = callees.as_slice() {
                        let full_name = format!("{}.{}", f.keyspace, f.name);
                        for (i, (arg, ty)) in args.iter().zip(&f.arg_types).enumerate() {
                            self.term(arg, &format!("arg{i}({full_name})"), ty);
                        }
                        return;
                    }
                }
                let function = function.trim_start_matches("system.");
                if let (Some(refusal), [Term::Bind(_)]) = (crate::functions::ambiguous_marker(function), &args[..]) {
                    self.refused.get_or_insert(refusal);
                    return;
                }
                for (i, arg) in args.iter().enumerate() {
                    let arg_ty = match function {
                        "fromjson" => CqlType::Text,
                        _ => crate::functions::parameter_type(function, i, arg, &[]).unwrap_or(CqlType::Timeuuid),
                    };
                    self.term(arg, &format!("arg{i}(system.{function})"), &arg_ty);
                }
            }
            // Cassandra names an operation's markers as its function's
            // arguments (`arg0(system._add)`).
            Term::Operation { op, left, right } => {
                match crate::term_operations::operand_types(*op, left, right, name, ty) {
                    Ok((a, b)) => {
                        let function = crate::term_operations::function_name(*op);
                        self.term(left, &format!("arg0(system.{function})"), &a);
                        self.term(right, &format!("arg1(system.{function})"), &b);
                    }
                    Err(e) => {
                        self.refused.get_or_insert(e);
                    }
                }
            }
            Term::Negation(operand) => match crate::term_operations::negation_type(operand, name, ty) {
                Ok(ty) => self.term(operand, "arg0(system._negate)", &ty),
                Err(e) => {
                    self.refused.get_or_insert(e);
                }
            },
            Term::Literal(_) | Term::EmptyBraces | Term::Column(_) => {}
        }
    }

    /// Keeps the first error of `check` on column `name`, if the table has it.
    fn check(&mut self, name: &str, check: impl FnOnce(&ColumnMeta) -> CqlResult<()>) {
        let Some(column) = self.meta.and_then(|m| m.column(name)) else { return };
        if let Err(e) = check(column) {
            self.refused.get_or_insert(e);
        }
    }

    fn column_type(&mut self, name: &str) -> CqlType {
        let Some(meta) = self.meta else { return CqlType::Blob };
        match meta.column(name) {
            Some(column) => column.ty.clone(),
            None => {
                self.unknown.get_or_insert_with(|| name.to_string());
                CqlType::Blob
            }
        }
    }

    /// The markers of subscripts in selectors (`m[?]`, `s[?..?]`), typed
    /// by the collection they index, under Cassandra's names.
    fn selector(&mut self, expr: &SelectorExpr) {
        match expr {
            SelectorExpr::Element { expr, key } => {
                self.subscript(expr, key);
                self.selector(expr);
            }
            SelectorExpr::Slice { expr, from, to } => {
                from.iter().chain(to.iter()).for_each(|bound| self.subscript(expr, bound));
                self.selector(expr);
            }
            SelectorExpr::WriteTimeOfPart { part, .. } => self.selector(part),
            SelectorExpr::FunctionCall { name, args } => {
                self.function_markers(name, args);
                args.iter().for_each(|a| self.selector(a))
            }
            SelectorExpr::Cast { expr, .. } | SelectorExpr::Field { expr, .. } | SelectorExpr::Negation(expr) => {
                self.selector(expr)
            }
            SelectorExpr::Arithmetic { left, right, .. } => {
                self.operand_marker(left, right);
                self.operand_marker(right, left);
                self.selector(left);
                self.selector(right);
            }
            // A cast tells its marker's type (`a + (int) ?`).
            SelectorExpr::Term(term @ Term::Cast { ty, .. }) => self.term(term, &term.to_string(), ty),
            SelectorExpr::Column(_)
            | SelectorExpr::CountStar
            | SelectorExpr::WriteTime(_)
            | SelectorExpr::Ttl(_)
            | SelectorExpr::Term(_) => {}
        }
    }

    /// The markers among a selector function's arguments
    /// (`similarity_cosine(v, ?)`), typed as the function takes them there
    /// (a similarity function's marker as its other vector argument);
    /// one whose type nothing tells is refused, as Cassandra refuses it.
    fn function_markers(&mut self, name: &str, args: &[SelectorExpr]) {
        let function = name.trim_start_matches("system.").to_ascii_lowercase();
        let marker = |a: &SelectorExpr| matches!(a, SelectorExpr::Term(Term::Bind(_)));
        if !args.iter().any(marker) {
            return;
        }
        // A user function's markers take the types of its only overload of
        // this arity, named as Cassandra names them (`arg0(ks.f)`); with
        // several overloads nothing tells which, and execution tells.
        let keyspace = self.keyspace.clone();
        match crate::user_functions::candidates(self.schema, &keyspace, &function, args.len()) {
            Ok(callees) if !callees.is_empty() => {
                let [callee] = callees.as_slice() else { return };
                let full_name = callee.full_name();
                for (i, (arg, ty)) in args.iter().zip(callee.arg_types()).enumerate() {
                    if let SelectorExpr::Term(term @ Term::Bind(_)) = arg {
                        self.term(term, &format!("arg{i}({full_name})"), ty);
                    }
                }
                return;
            }
            Ok(_) => {}
            Err(e) => {
                self.refused.get_or_insert(e);
                return;
            }
        }
        // ScyllaDB picks count's, min's and max's overload by the argument's
        // type, which a marker has none of (its text).
        if matches!(function.as_str(), "count" | "min" | "max") {
            self.refused
                .get_or_insert(invalid(format!("{function}() function is only valid when argument types are known")));
            return;
        }
        // A column has its type; a literal the one it takes on its own
        // (a list beside no vector column: a float vector of its length).
        let others: Vec<Option<CqlType>> = args
            .iter()
            .enumerate()
            .map(|(j, a)| match a {
                SelectorExpr::Column(c) => self.meta.and_then(|m| m.column(c)).map(|c| c.ty.clone()),
                SelectorExpr::Term(Term::Bind(_)) => None,
                SelectorExpr::Term(term) => crate::functions::parameter_type(&function, j, term, &[]),
                _ => None,
            })
            .collect();
        for (i, arg) in args.iter().enumerate() {
            let SelectorExpr::Term(term @ Term::Bind(_)) = arg else { continue };
            match crate::functions::parameter_type(&function, i, term, &others) {
                Some(ty) => self.term(term, &format!("arg{i}(system.{function})"), &ty),
                None => {
                    self.refused.get_or_insert(crate::functions::cannot_infer("?", &function));
                }
            }
        }
    }

    /// A marker operand beside a column (`v + ?`) has the column's type.
    fn operand_marker(&mut self, operand: &SelectorExpr, other: &SelectorExpr) {
        let (SelectorExpr::Term(term @ Term::Bind(_)), SelectorExpr::Column(column)) = (operand, other) else {
            return;
        };
        if let Some(ty) = self.meta.and_then(|m| m.column(column)).map(|c| c.ty.clone()) {
            self.term(term, column, &ty);
        }
    }

    fn subscript(&mut self, collection: &SelectorExpr, key: &Term) {
        let SelectorExpr::Column(column) = collection else { return };
        // An unknown column is the selection's error, told at compiling.
        let Some(meta) = self.meta.and_then(|m| m.column(column)) else { return };
        let (name, ty) = match meta.ty.unfrozen() {
            CqlType::Map(k, _) => (format!("key({column})"), k.as_ref().clone()),
            CqlType::Set(e) => (format!("value({column})"), e.as_ref().clone()),
            CqlType::List(_) => (format!("idx({column})"), CqlType::Int),
            _ => return,
        };
        self.term(key, &name, &ty);
    }

    fn using(&mut self, using: &Using) {
        if let Some(t) = &using.ttl {
            self.term(t, "[ttl]", &CqlType::Int);
        }
        if let Some(t) = &using.timestamp {
            self.term(t, "[timestamp]", &CqlType::Bigint);
        }
        if let Some(t) = &using.timeout {
            self.term(t, crate::using_timeout::RECEIVER, &CqlType::Duration);
        }
    }

    fn relations(&mut self, relations: &[Relation]) {
        for relation in relations {
            match relation {
                Relation::Simple { column, op: op @ (Operator::Contains | Operator::ContainsKey), value } => {
                    let ty = self.column_type(column);
                    let mut contained = ty.clone();
                    self.check(column, |c| contained_type(c, *op).map(|t| contained = t));
                    self.term(value, column, &contained);
                }
                Relation::Simple { column, value, .. } => {
                    let ty = self.column_type(column);
                    self.term(value, column, &ty);
                }
                Relation::In { column, values } | Relation::NotIn { column, values } => {
                    let ty = self.column_type(column);
                    let negated = matches!(relation, Relation::NotIn { .. });
                    match values {
                        InValues::Bind(i) => {
                            self.mark(*i, &in_marker_name(negated, column), &CqlType::List(Box::new(ty)))
                        }
                        InValues::Terms(terms) => terms.iter().for_each(|t| self.term(t, column, &ty)),
                    }
                }
                // `token(k) > token(?)`: the markers have the key's types but
                // the function's argument names (`arg0(system.token)`), as
                // ScyllaDB names them: a driver that matched them to the key
                // would route a range by its bound (and refuse an unset one).
                Relation::Token { value: Term::FunctionCall { name, args }, .. }
                    if name == "token" || name == "system.token" =>
                {
                    let key: Vec<CqlType> =
                        self.meta.map(|m| m.partition_key().map(|c| c.ty.clone()).collect()).unwrap_or_default();
                    for (i, (arg, ty)) in args.iter().zip(key).enumerate() {
                        self.term(arg, &format!("arg{i}(system.token)"), &ty);
                    }
                }
                Relation::Token { value, .. } => self.term(value, "partition key token", &CqlType::Bigint),
                Relation::MultiColumn { columns, value, .. } => {
                    let tuple = CqlType::Tuple(columns.iter().map(|c| self.column_type(c)).collect());
                    self.term(value, &format!("({})", columns.join(",")), &tuple);
                }
                Relation::MultiColumnIn { columns, values } => {
                    let tuple = CqlType::Tuple(columns.iter().map(|c| self.column_type(c)).collect());
                    let name = format!("in({})", columns.join(","));
                    match values {
                        InValues::Bind(i) => self.mark(*i, &name, &CqlType::List(Box::new(tuple))),
                        InValues::Terms(terms) => terms.iter().for_each(|t| self.term(t, &name, &tuple)),
                    }
                }
                Relation::IsNotNull { .. } => {}
                Relation::Element { column, key, value, .. } => match self.column_type(column).unfrozen() {
                    CqlType::Map(k, v) => {
                        self.term(key, &format!("key({column})"), k);
                        self.term(value, &format!("value({column})"), v);
                    }
                    CqlType::List(elem) => {
                        self.term(key, &format!("idx({column})"), &CqlType::Int);
                        self.term(value, &format!("value({column})"), elem);
                    }
                    _ => {}
                },
            }
        }
    }

    /// The markers of `IF c op term` (and `IF m[key] op term`, `IF u.f op
    /// term`) conditions.
    fn condition(&mut self, condition: &Condition) {
        let Condition::IfColumns(conditions) = condition else { return };
        for condition in conditions {
            let target = &condition.target;
            let mut column = target.column.clone();
            // A frozen collection's element is tested as a non-frozen one's.
            let column_ty = self.column_type(&column);
            let element_ty = if target.element.is_some() { column_ty.unfrozen().clone() } else { column_ty };
            let ty = match (&target.element, &target.field, element_ty) {
                (Some(key), _, CqlType::Map(k, v)) => {
                    self.term(key, &format!("key({column})"), &k);
                    *v
                }
                (Some(index), _, CqlType::List(elem)) => {
                    self.term(index, &format!("idx({column})"), &CqlType::Int);
                    *elem
                }
                (None, Some(field), ty) => {
                    column = format!("{column}.{field}");
                    field_type(&ty, field)
                }
                (_, _, ty) => ty,
            };
            match (condition.op, &condition.value) {
                (op @ (Operator::In | Operator::NotIn), Term::Bind(i)) => {
                    self.mark(*i, &in_marker_name(op == Operator::NotIn, &column), &CqlType::List(Box::new(ty)))
                }
                (Operator::In | Operator::NotIn, Term::List(items)) => {
                    items.iter().for_each(|t| self.term(t, &column, &ty))
                }
                (_, value) => self.term(value, &column, &ty),
            }
        }
    }

    fn assignment(&mut self, assignment: &Assignment) {
        self.check(assignment_column(assignment), |c| check_collection_operation(c, assignment));
        match assignment {
            Assignment::Set { column, value }
            | Assignment::Add { column, value }
            | Assignment::Prepend { column, value } => {
                let ty = self.column_type(column);
                self.term(value, column, &ty);
            }
            Assignment::Subtract { column, value } => {
                let ty = match self.column_type(column) {
                    CqlType::Map(k, _) => CqlType::Set(k),
                    other => other,
                };
                self.term(value, column, &ty);
            }
            Assignment::SetElement { column, key, value } => {
                let (key_ty, value_ty) = match self.column_type(column) {
                    CqlType::Map(k, v) => (*k, *v),
                    CqlType::List(e) => (CqlType::Int, *e),
                    other => (CqlType::Blob, other),
                };
                self.term(key, column, &key_ty);
                self.term(value, column, &value_ty);
            }
            Assignment::SetField { column, field, value } => {
                let ty = field_type(&self.column_type(column), field);
                self.term(value, &format!("{column}.{field}"), &ty);
            }
        }
    }
}

/// The type of `field` of user type `ty` (frozen or not); blob when there
/// is no such field, which execution then refuses.
fn field_type(ty: &CqlType, field: &str) -> CqlType {
    match ty.unfrozen() {
        CqlType::Udt(udt) => udt.fields.iter().find(|(n, _)| n == field).map_or(CqlType::Blob, |(_, ty)| ty.clone()),
        _ => CqlType::Blob,
    }
}

/// (keyspace, table) a statement works on, if it names one.
fn target(statement: &Statement) -> Option<(Option<&str>, &str)> {
    Some(match statement {
        Statement::Insert(s) => (s.keyspace.as_deref(), s.table.as_str()),
        Statement::InsertJson(s) => (s.keyspace.as_deref(), s.table.as_str()),
        Statement::Update(s) => (s.keyspace.as_deref(), s.table.as_str()),
        Statement::Delete(s) => (s.keyspace.as_deref(), s.table.as_str()),
        Statement::Select(s) => (s.keyspace.as_deref(), s.table.as_str()),
        _ => return None,
    })
}

fn resolve<'s>(schema: &'s Schema, statement: &Statement, session: Option<&str>) -> CqlResult<Option<&'s TableMeta>> {
    let Some((named, table)) = target(statement) else { return Ok(None) };
    let keyspace = qualify(named, session)?;
    if schema.keyspace(keyspace).is_none() {
        return Err(invalid(format!("Keyspace {keyspace} does not exist")));
    }
    schema
        .table(keyspace, table)
        .map(|t| Some(t.as_ref()))
        .ok_or_else(|| invalid(format!("unconfigured table {table}")))
}

pub fn bind_specs(schema: &Schema, parsed: &Parsed, session: Option<&str>) -> CqlResult<Vec<ColumnSpec>> {
    let meta = resolve(schema, &parsed.statement, session)?;
    let mut c = Collector {
        specs: vec![None; parsed.bind_markers.len()],
        schema,
        meta,
        keyspace: meta.map_or_else(|| session.unwrap_or_default().to_string(), |m| m.keyspace.clone()),
        table: meta.map_or_else(String::new, |m| m.name.clone()),
        unknown: None,
        refused: None,
    };
    walk(&mut c, schema, &parsed.statement, session)?;
    if let Some(name) = &c.unknown {
        return Err(invalid(format!("Undefined column name {name}")));
    }
    if let Some(e) = c.refused {
        return Err(e);
    }
    Ok(c.specs
        .into_iter()
        .zip(&parsed.bind_markers)
        .map(|(spec, marker)| {
            let mut spec = spec.unwrap_or(ColumnSpec {
                keyspace: c.keyspace.clone(),
                table: c.table.clone(),
                name: String::new(),
                ty: CqlType::Blob,
            });
            if let Some(name) = &marker.name {
                spec.name = name.clone();
            }
            spec
        })
        .collect())
}

fn walk<'s>(c: &mut Collector<'s>, schema: &'s Schema, statement: &Statement, session: Option<&str>) -> CqlResult<()> {
    match statement {
        Statement::Insert(s) => {
            for (column, value) in s.columns.iter().zip(&s.values) {
                let ty = c.column_type(column);
                c.term(value, column, &ty);
            }
            c.using(&s.using);
        }
        Statement::InsertJson(s) => {
            c.term(&s.json, crate::json::JSON_COLUMN, &CqlType::Text);
            c.using(&s.using);
        }
        Statement::Update(s) => {
            c.using(&s.using);
            s.assignments.iter().for_each(|a| c.assignment(a));
            c.relations(&s.where_clause);
            c.condition(&s.condition);
        }
        Statement::Delete(s) => {
            for target in &s.columns {
                if let Some(key) = &target.element {
                    c.check(&target.column, check_element_deletion);
                    let ty = match c.column_type(&target.column) {
                        CqlType::Map(k, _) => *k,
                        CqlType::Set(e) => *e,
                        _ => CqlType::Int,
                    };
                    c.term(key, &target.column, &ty);
                }
            }
            c.using(&s.using);
            c.relations(&s.where_clause);
            c.condition(&s.condition);
        }
        Statement::Select(s) => {
            if let Selection::Selectors(list) = &s.selection {
                for selector in list {
                    // A marker standing alone as a selector has nothing to
                    // take a type from (Cassandra's text).
                    if let SelectorExpr::Term(term @ Term::Bind(_)) = &selector.expr {
                        c.refused
                            .get_or_insert(invalid(format!("Cannot infer type for term {term} in selection clause")));
                    }
                    c.selector(&selector.expr);
                }
            }
            c.relations(&s.where_clause);
            if let Some(t) = &s.per_partition_limit {
                c.term(t, "[per_partition_limit]", &CqlType::Int);
            }
            if let Some(t) = &s.limit {
                c.term(t, "[limit]", &CqlType::Int);
            }
            if let Some(t) = &s.timeout {
                c.term(t, crate::using_timeout::RECEIVER, &CqlType::Duration);
            }
        }
        Statement::Truncate(s) => {
            if let Some(t) = &s.timeout {
                c.term(t, crate::using_timeout::RECEIVER, &CqlType::Duration);
            }
        }
        Statement::AlterTable(alter) => {
            if let AlterTableOp::Drop { timestamp_marker: Some(index), .. } = &alter.op {
                c.term(&Term::Bind(*index), "[timestamp]", &CqlType::Bigint);
            }
        }
        Statement::Batch(batch) => {
            c.using(&batch.using);
            for inner in &batch.statements {
                let meta = resolve(schema, inner, session)?;
                let saved = std::mem::replace(&mut c.meta, meta);
                walk(c, schema, inner, session)?;
                c.meta = saved;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Marker indexes of the partition key columns, in key order, when each is
/// bound by exactly one `=` marker (or INSERT value); empty otherwise.
pub fn partition_key_indexes(schema: &Schema, parsed: &Parsed, session: Option<&str>) -> Vec<u16> {
    let Ok(Some(meta)) = resolve(schema, &parsed.statement, session) else { return Vec::new() };
    let bound: Vec<(&str, usize)> = match &parsed.statement {
        Statement::Insert(s) => {
            s.columns.iter().zip(&s.values).filter_map(|(c, v)| marker(v).map(|i| (c.as_str(), i))).collect()
        }
        Statement::Update(s) => equal_markers(&s.where_clause),
        Statement::Delete(s) => equal_markers(&s.where_clause),
        Statement::Select(s) => equal_markers(&s.where_clause),
        _ => Vec::new(),
    };
    let mut indexes = Vec::new();
    for column in meta.partition_key() {
        match bound.iter().find(|(name, _)| *name == column.name) {
            Some((_, i)) => indexes.push(*i as u16),
            None => return Vec::new(),
        }
    }
    indexes
}

fn marker(term: &Term) -> Option<usize> {
    match term {
        Term::Bind(i) => Some(*i),
        Term::Cast { term, .. } => marker(term),
        _ => None,
    }
}

fn equal_markers(relations: &[Relation]) -> Vec<(&str, usize)> {
    relations
        .iter()
        .filter_map(|r| match r {
            Relation::Simple { column, op: Operator::Eq, value } => marker(value).map(|i| (column.as_str(), i)),
            _ => None,
        })
        .collect()
}
