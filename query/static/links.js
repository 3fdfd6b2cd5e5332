// External links of a row: its `fleetscope.io/ui-url` annotation (row.uiUrl), else its kind's
// `ui_url_template` from the kinds file. Only absolute http(s) URLs are ever shown.

const FIELDS = ["cluster", "namespace", "kind", "name", "apiVersion"];

export function safeHttpUrl(raw) {
  if (typeof raw !== "string" || !raw) return null;
  let url;
  try {
    url = new URL(raw);
  } catch (e) {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

export function fillTemplate(template, row) {
  return template.replace(/\{(\w+)\}/g, (whole, field) =>
    FIELDS.includes(field) ? encodeURIComponent(row[field] ?? "") : whole,
  );
}

export function externalUrl(row, templates) {
  const fromAnnotation = safeHttpUrl(row.uiUrl);
  if (fromAnnotation) return fromAnnotation;
  const template = templates[row.kind];
  return template ? safeHttpUrl(fillTemplate(template, row)) : null;
}
