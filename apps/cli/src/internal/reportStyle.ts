export const outcomeColors: Record<string, string> = {
  Succeeded: "#16a34a",
  Cached: "#65a30d",
  Failed: "#dc2626",
  TimedOut: "#ea580c",
  ClaimTimedOut: "#b45309",
  Interrupted: "#7c3aed",
  Cancelled: "#6b7280",
  Skipped: "#9ca3af",
  Running: "#2563eb"
}

export const spanStyles: ReadonlyArray<readonly [kind: string, label: string, background: string]> = [
  ["running", "running", "#3b82f6"],
  ["merging", "merging", "#0d9488"],
  ["queued", "queued (waiting for a slot)", "#cbd5e1"],
  ["waiting-deps", "waiting for dependencies", "repeating-linear-gradient(135deg,#94a3b8 0 3px,#e2e8f0 3px 6px)"],
  ["waiting-claims", "waiting for claims", "repeating-linear-gradient(135deg,#f59e0b 0 3px,#fef3c7 3px 6px)"],
  ["waiting-rate-limit", "waiting for a rate limit", "repeating-linear-gradient(135deg,#a855f7 0 3px,#f3e8ff 3px 6px)"]
]

const outcomeRules = (): string =>
  Object.entries(outcomeColors)
    .map(([tag, color]) => `.outcome-${tag} .cap,.badge.outcome-${tag},.swatch.outcome-${tag}{background:${color}}`)
    .join("\n")

const spanRules = (): string => spanStyles.map(([kind, , bg]) => `.seg-${kind}{background:${bg}}`).join("\n")

const base = `
*{box-sizing:border-box}
body{margin:0;padding:24px 32px;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827;background:#fff}
h1{font-size:20px;margin:0 0 4px}
h2{font-size:15px;margin:28px 0 10px}
.muted{color:#6b7280}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
header .meta{display:flex;flex-wrap:wrap;gap:6px 22px;margin-top:8px}
header .meta>div>span:first-child{color:#6b7280;margin-right:6px}
.chips{display:flex;flex-wrap:wrap;gap:6px;margin-top:10px}
.chip{display:inline-flex;align-items:center;gap:6px;border:1px solid #e5e7eb;border-radius:999px;padding:1px 10px 1px 6px}
.swatch{display:inline-block;width:14px;height:10px;border-radius:2px;vertical-align:middle}
.status{font-weight:600;text-transform:uppercase;font-size:11px;letter-spacing:.04em;padding:1px 8px;border-radius:4px;color:#fff}
.status-succeeded{background:#16a34a}.status-failed{background:#dc2626}.status-running{background:#2563eb}
.status-interrupted{background:#7c3aed}.status-crashed{background:#111827}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:0 0 10px;color:#374151}
.legend .item{display:inline-flex;align-items:center;gap:6px}
.legend .swatch.cp{background:#fff;outline:2px solid #db2777;outline-offset:0}
.legend .swatch.failmark{width:3px;height:14px;background:#b91c1c}
.timeline{border:1px solid #e5e7eb;border-radius:6px;padding:6px 0}
.row{display:grid;grid-template-columns:200px 1fr 170px;align-items:center;height:28px}
.row:not(.axis-row):hover{background:#f9fafb}
.row .label{padding:0 12px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.row.critical .label{font-weight:700}
.cp-mark{color:#db2777;margin-right:4px}
.row .end{padding:0 12px 0 16px;white-space:nowrap}
.axis-row{height:22px;border-bottom:1px solid #e5e7eb}
.axis{position:relative;height:100%}
.tick{position:absolute;bottom:3px;transform:translateX(-50%);font-size:11px;color:#6b7280;white-space:nowrap}
.tick:first-child{transform:none}
.track{position:relative;height:100%;background-image:linear-gradient(to right,#eef0f3 1px,transparent 1px);background-size:var(--tick) 100%}
.bar{position:absolute;top:7px;height:14px;min-width:5px;background:#eef2f7;border-radius:2px}
.bar.critical{outline:2px solid #db2777;outline-offset:1px}
.seg{position:absolute;top:0;bottom:0}
.cap{position:absolute;right:0;top:-3px;bottom:-3px;width:5px;border-radius:1px;background:#6b7280;box-shadow:0 0 0 1px #fff}
.fail{position:absolute;top:-5px;bottom:-5px;width:3px;margin-left:-1px;background:#b91c1c;border-radius:1px}
.fail::after{content:"";position:absolute;top:-3px;left:-2px;width:7px;height:7px;border-radius:50%;background:#b91c1c}
.badge{display:inline-block;color:#fff;background:#6b7280;font-size:11px;font-weight:600;padding:0 7px;border-radius:4px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:5px 10px;border-bottom:1px solid #eef0f3;vertical-align:top}
th{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:#6b7280;border-bottom:1px solid #d1d5db}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td{white-space:nowrap}
td.detail{white-space:normal;min-width:240px;max-width:520px;overflow-wrap:anywhere}
.failures{margin:4px 0 0;padding-left:16px;color:#991b1b;font-size:12px}
`

export const css = (): string => [base, outcomeRules(), spanRules()].join("\n")
