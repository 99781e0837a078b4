//! What running a rule may cost, estimated from its compiled AST before it runs: the budget's
//! first line (the deadline is the backstop).
//!
//! Modelled on kube-apiserver's CEL cost estimator (cel-go's `checker/cost.go`): every node
//! costs 1; a call also costs a tenth of the sizes of its operands (the factor Kubernetes charges
//! for traversing strings and lists), `matches` the product of its text's and its pattern's, and
//! `split` also one per part it may make;
//! a comprehension (`all`, `exists`, `exists_one`, `map`, `filter`) costs the size of its range
//! times the cost of its body. Kubernetes bounds the size of data by the schema's `maxItems` and
//! `maxLength`; the rules here have no schema, so data is bounded by what is actually bound: the
//! longest collection and the longest string anywhere in it ([`Size::of`]), measured when it is
//! bound. Whatever the estimator cannot size is taken to be as large as the largest bound data.

use super::ast::children;
use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use cel::objects::Key;

/// A bound on the sizes inside a value: its longest list or map, and its longest string or bytes,
/// anywhere in it. A scalar is `Size::default()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Size {
    /// The most elements or entries of any list or map.
    pub items: u64,
    /// The most bytes of any string or bytes.
    pub bytes: u64,
}

impl Size {
    /// The sizes inside `value`.
    pub fn of(value: &cel::Value) -> Size {
        match value {
            cel::Value::List(items) => {
                items.iter().map(Size::of).fold(Size { items: len(items.len()), bytes: 0 }, Size::max)
            }
            cel::Value::Map(map) => {
                map.map.iter().fold(Size { items: len(map.map.len()), bytes: 0 }, |size, (k, v)| {
                    let key = match k {
                        Key::String(text) => Size { items: 0, bytes: len(text.len()) },
                        _ => Size::default(),
                    };
                    size.max(key).max(Size::of(v))
                })
            }
            cel::Value::String(text) => Size { items: 0, bytes: len(text.len()) },
            cel::Value::Bytes(bytes) => Size { items: 0, bytes: len(bytes.len()) },
            _ => Size::default(),
        }
    }

    fn max(self, other: Size) -> Size {
        Size { items: self.items.max(other.items), bytes: self.bytes.max(other.bytes) }
    }

    /// The sizes of a concatenation.
    fn plus(self, other: Size) -> Size {
        Size { items: self.items.saturating_add(other.items), bytes: self.bytes.saturating_add(other.bytes) }
    }

    /// What reading the whole value may touch, as Kubernetes counts a traversal.
    fn traversal(self) -> u64 {
        self.items.saturating_add(self.bytes)
    }

    /// The most bytes the value's elements take when written one after another (`join`, `format`).
    fn spelled(self) -> u64 {
        self.items.saturating_add(1).saturating_mul(self.bytes)
    }
}

/// `n` as a size.
fn len(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The estimated cost of running `expr` with the variables `bound` (by name, with their sizes).
pub fn estimate(expr: &IdedExpr, bound: &[(String, Size)]) -> u64 {
    let unknown = bound.iter().map(|(_, size)| *size).fold(Size::default(), Size::max);
    let scopes = bound.iter().map(|(name, size)| (name.as_str(), *size)).collect();
    Estimator { scopes, unknown }.visit(expr).0
}

/// Functions whose result is a scalar (a bool or a number): its size is nothing.
const SCALAR: &[&str] = &[
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::NOT_STRICTLY_FALSE,
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::LESS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::GREATER_EQUALS,
    operators::IN,
    operators::SUBSTRACT,
    operators::MULTIPLY,
    operators::DIVIDE,
    operators::MODULO,
    operators::NEGATE,
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "indexOf",
    "lastIndexOf",
    "int",
    "uint",
    "double",
];

/// Walks an expression with the sizes of the names in scope, innermost last.
struct Estimator<'e> {
    scopes: Vec<(&'e str, Size)>,
    /// The size of what cannot be sized otherwise: the largest bound data.
    unknown: Size,
}

impl<'e> Estimator<'e> {
    /// The cost of `expr` and the size of its value.
    fn visit(&mut self, expr: &'e IdedExpr) -> (u64, Size) {
        match &expr.expr {
            Expr::Literal(LiteralValue::String(text)) => (1, Size { items: 0, bytes: len(text.inner().len()) }),
            Expr::Literal(LiteralValue::Bytes(bytes)) => (1, Size { items: 0, bytes: len(bytes.inner().len()) }),
            Expr::Literal(_) | Expr::Unspecified => (1, Size::default()),
            Expr::Ident(name) => {
                let size =
                    self.scopes.iter().rev().find(|(n, _)| *n == name.as_str()).map_or(self.unknown, |(_, s)| *s);
                (1, size)
            }
            Expr::Select(select) => {
                let (cost, size) = self.visit(&select.operand);
                (cost.saturating_add(1), if select.test { Size::default() } else { size })
            }
            Expr::List(_) | Expr::Map(_) | Expr::Struct(_) => self.collection(children(expr)),
            Expr::Call(call) => {
                let operands: Vec<(u64, Size)> =
                    call.target.as_deref().into_iter().chain(&call.args).map(|operand| self.visit(operand)).collect();
                let sizes: Vec<Size> = operands.iter().map(|(_, size)| *size).collect();
                let traversal =
                    sizes.iter().fold(0, |sum: u64, size| sum.saturating_add(size.traversal())).div_ceil(10);
                let own = match (call.func_name.as_str(), sizes.as_slice()) {
                    ("matches", [text, pattern]) => {
                        (text.traversal() / 10 + 1).saturating_mul(pattern.traversal() / 4 + 1)
                    }
                    // Each part is a string of its own: as many as the text has bytes.
                    ("split", [text, ..]) => traversal.saturating_add(text.bytes),
                    _ => traversal,
                };
                let cost = operands.iter().fold(own.saturating_add(1), |sum, (cost, _)| sum.saturating_add(*cost));
                (cost, self.result(&call.func_name, &sizes))
            }
            Expr::Comprehension(c) => {
                let (range_cost, range) = self.visit(&c.iter_range);
                let (init_cost, init) = self.visit(&c.accu_init);
                let depth = self.scopes.len();
                // An element is no larger than the largest thing inside its range.
                self.scopes.extend(c.iter_var2.iter().chain([&c.iter_var]).map(|var| (var.as_str(), range)));
                self.scopes.push((c.accu_var.as_str(), init));
                let (condition, _) = self.visit(&c.loop_cond);
                let (step_cost, step) = self.visit(&c.loop_step);
                let (result_cost, _) = self.visit(&c.result);
                self.scopes.truncate(depth);
                let body = condition.saturating_add(step_cost);
                let cost = [range_cost, init_cost, range.items.saturating_mul(body), result_cost]
                    .into_iter()
                    .fold(0, u64::saturating_add);
                // `map` and `filter` collect into a list as long as their range.
                let collected = match c.accu_init.expr {
                    Expr::List(_) => Size { items: range.items, bytes: range.bytes },
                    _ => Size::default(),
                };
                (cost, step.max(collected))
            }
        }
    }

    /// The cost and size of a list or map literal of `parts` (a map's keys and values: as long
    /// as twice its entries, at most), which copies them as a call traverses its operands.
    fn collection(&mut self, parts: Vec<&'e IdedExpr>) -> (u64, Size) {
        let (mut cost, mut copied, mut size, mut count) = (1u64, 0u64, Size::default(), 0u64);
        for part in parts {
            let (part_cost, part_size) = self.visit(part);
            cost = cost.saturating_add(part_cost);
            copied = copied.saturating_add(part_size.traversal());
            (size, count) = (size.max(part_size), count + 1);
        }
        (cost.saturating_add(copied.div_ceil(10)), size.max(Size { items: count, bytes: 0 }))
    }

    /// The size of what function `name` returns for operands (target first) of `sizes`.
    fn result(&self, name: &str, sizes: &[Size]) -> Size {
        let sum = || sizes.iter().copied().fold(Size::default(), Size::plus);
        match (name, sizes) {
            _ if SCALAR.contains(&name) => Size::default(),
            (operators::ADD, _) => sum(),
            (operators::INDEX, [container, ..]) => *container,
            (operators::CONDITIONAL, [_, then, otherwise]) => then.max(*otherwise),
            ("split", [text, ..]) => Size { items: text.bytes.saturating_add(1), bytes: text.bytes },
            ("replace", [text, _, with, ..]) => {
                Size { items: 0, bytes: text.bytes.saturating_add(1).saturating_mul(with.bytes.saturating_add(1)) }
            }
            ("join", [list, separator @ ..]) => {
                let separators = separator.first().map_or(0, |s| list.items.saturating_mul(s.bytes));
                Size { items: 0, bytes: list.spelled().saturating_add(separators) }
            }
            ("format", [text, arguments]) => Size { items: 0, bytes: text.bytes.saturating_add(arguments.spelled()) },
            _ => sum().max(self.unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::Env;
    use serde_json::json;

    fn cost(rule: &str, bound: &[(&str, Size)]) -> u64 {
        let program = Env::stdlib().compile(rule).unwrap();
        let bound: Vec<(String, Size)> = bound.iter().map(|(name, size)| (name.to_string(), *size)).collect();
        estimate(program.expression(), &bound)
    }

    /// `[1, 2, ..., n]` written out.
    fn literal(n: usize) -> String {
        format!("[{}]", (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(","))
    }

    #[test]
    fn a_comprehension_costs_its_range_times_its_body() {
        let one = cost(&format!("{}.all(a, true)", literal(1000)), &[]);
        let two = cost(&format!("{0}.all(a, {0}.all(b, true))", literal(1000)), &[]);
        let three = cost(&format!("{0}.all(a, {0}.all(b, {0}.all(c, true)))", literal(1000)), &[]);
        assert!((1000..20_000).contains(&one), "{one}");
        assert!(two > 1000 * (one - 1001) && two < 1000 * one * 2, "{one} then {two}");
        assert!(three > 1000 * (two - 1001), "{two} then {three}");
        assert!(three > 1_000_000_000, "a billion iterations: {three}");
    }

    #[test]
    fn data_is_as_large_as_what_is_bound() {
        let rule = "obj.status.conditions.exists(c, c.type == 'Ready')";
        let small = cost(rule, &[("obj", Size { items: 4, bytes: 20 })]);
        let many = cost(rule, &[("obj", Size { items: 4000, bytes: 20 })]);
        let long = cost(rule, &[("obj", Size { items: 4, bytes: 20_000 })]);
        assert!(small < 100, "{small}");
        assert!(many > 1000 * small / 2, "iterations follow the longest list: {small} then {many}");
        assert!(long > 100 * small, "comparisons follow the longest string: {small} then {long}");
        assert_eq!(cost("x.y.size() > 0", &[]), cost("x.y.size() > 0", &[("other", Size::default())]));
    }

    #[test]
    fn what_a_rule_makes_is_sized_from_what_it_is_made_of() {
        let bound = [("obj", Size { items: 1, bytes: 10 })];
        let on = |range: &str| cost(&format!("{range}.all(a, true)"), &bound);
        let base = on("[1]");
        assert!(on("obj.s.split(',')") >= base + 10, "split yields a list as long as the text");
        let doubled = format!("{0} + {0}", literal(100));
        assert!(on(&doubled) > on(&literal(100)) + 100, "a sum is as long as both");
        assert!(on(&format!("{}.map(x, x)", literal(100))) > 2 * on(&literal(100)) - 1000, "map keeps the length");
        let replaced = cost("obj.s.replace('', obj.s).replace('', obj.s).contains('x')", &bound);
        assert!(replaced > 100, "each replace multiplies the length: {replaced}");
        let matched = cost("obj.s.matches(obj.p)", &[("obj", Size { items: 1, bytes: 10_000 })]);
        assert!(matched > 1_000_000, "text by pattern: {matched}");
        let unknown = cost("[1].all(a, unknown_fn(a).all(b, true))", &[("obj", Size { items: 500, bytes: 0 })]);
        assert!(unknown > 500, "an unknown result is as large as the largest data: {unknown}");
    }

    #[test]
    fn the_size_of_a_value_is_its_longest_collection_and_string_anywhere() {
        let value = crate::rules::to_cel(&json!({"a": [1, 2, 3], "b": {"c": "four"}, "longer-key": null}));
        assert_eq!(Size::of(&value), Size { items: 3, bytes: 10 });
        assert_eq!(Size::of(&cel::Value::Int(5)), Size::default());
    }
}
