// A service's `values` (a YAML string) as a JSON value, checked as the Flux plugin checks it.
//
// js-yaml with its core schema: YAML 1.2 scalars (`yes`/`no` stay strings, dates stay strings),
// duplicate keys and multiple documents are errors, as with the Flux plugin's serde_norway.

import { load, CORE_SCHEMA } from "js-yaml";

/** Why a service's values cannot be used; the message follows "values ". */
export class ValuesError extends Error {}

/** The values as a JSON object; none when blank or null; an error unless a mapping. */
export function parseValues(text) {
  if (typeof text !== "string" || text.trim() === "") return null;
  let value;
  try {
    value = load(text, { schema: CORE_SCHEMA, json: false });
  } catch (e) {
    throw new ValuesError(`are not valid YAML: ${(e.message ?? String(e)).split("\n")[0]}`);
  }
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) throw new ValuesError("must be a mapping, not a list");
  const kind = { string: "a string", number: "a number", boolean: "a boolean" }[typeof value];
  if (kind) throw new ValuesError(`must be a mapping, not ${kind}`);
  return toJson(value);
}

/** The YAML value as JSON: non-finite numbers (`.inf`, `.nan`) have no JSON form. */
function toJson(value) {
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new ValuesError(`contain ${value}, which JSON cannot represent`);
  }
  if (Array.isArray(value)) return value.map(toJson);
  if (value !== null && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = toJson(v);
    return out;
  }
  return value;
}
