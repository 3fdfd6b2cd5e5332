// A small YAML emitter for showing objects (read-only): block mappings and sequences, scalars
// quoted when YAML would otherwise read them as something else.

const PLAIN = /^[A-Za-z_/][A-Za-z0-9_./@:+-]*( [A-Za-z0-9_./@:+-]+)*$/;
const RESERVED = /^(true|false|yes|no|on|off|null|y|n|~)$/i;

function scalar(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "boolean") return String(v);
  if (typeof v === "number") {
    const t = String(v); // YAML 1.1 readers want a dot in exponent floats: 1.0e+21
    return /e/.test(t) && !t.includes(".") ? t.replace("e", ".0e") : t;
  }
  const s = String(v);
  if (s === "" || RESERVED.test(s) || !PLAIN.test(s) || /:$|: | #/.test(s)) {
    return JSON.stringify(s);
  }
  return s;
}

function key(k) {
  return PLAIN.test(k) && !RESERVED.test(k) && !k.includes(": ") ? k : JSON.stringify(k);
}

// Multi-line text reads best as a literal block, when the block gives back the same string.
function blockable(s) {
  return s.includes("\n") && !/^[ \t]|[\r\t]|\n\n$|[ ]\n|[ ]$/.test(s) && !/\n[ ]/.test(s);
}

function isEmpty(v) {
  return typeof v === "object" && v !== null && Object.keys(v).length === 0;
}

function lines(v, indent, out) {
  const pad = "  ".repeat(indent);
  if (Array.isArray(v)) {
    for (const item of v) {
      if (typeof item === "object" && item !== null && !isEmpty(item)) {
        const sub = [];
        lines(item, indent + 1, sub);
        out.push(`${pad}- ${sub[0].trimStart()}`, ...sub.slice(1));
      } else {
        out.push(`${pad}- ${isEmpty(item) ? (Array.isArray(item) ? "[]" : "{}") : scalar(item)}`);
      }
    }
    return;
  }
  for (const [k, val] of Object.entries(v)) {
    if (typeof val === "object" && val !== null && !isEmpty(val)) {
      out.push(`${pad}${key(k)}:`);
      lines(val, Array.isArray(val) ? indent : indent + 1, out);
    } else if (isEmpty(val)) {
      out.push(`${pad}${key(k)}: ${Array.isArray(val) ? "[]" : "{}"}`);
    } else if (typeof val === "string" && blockable(val)) {
      const text = val.endsWith("\n") ? val.slice(0, -1) : val;
      out.push(`${pad}${key(k)}: ${val.endsWith("\n") ? "|" : "|-"}`);
      for (const line of text.split("\n")) out.push(line ? `${pad}  ${line}` : "");
    } else {
      out.push(`${pad}${key(k)}: ${scalar(val)}`);
    }
  }
}

export function toYaml(value) {
  if (typeof value !== "object" || value === null) return `${scalar(value)}\n`;
  const out = [];
  lines(value, 0, out);
  return `${out.join("\n")}\n`;
}
