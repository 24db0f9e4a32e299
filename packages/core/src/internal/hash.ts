const canonical = (value: unknown, seen: Set<object>): string => {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value)
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : `"${value}"`
    case "boolean":
      return value ? "true" : "false"
    case "bigint":
      return `"${value}n"`
    case "undefined":
    case "function":
    case "symbol":
      return "null"
  }
  if (value === null) return "null"
  const object = value as object
  if (seen.has(object)) throw new TypeError("cannot hash a cyclic value")
  seen.add(object)
  const text = canonicalObject(object, seen)
  seen.delete(object)
  return text
}

const canonicalObject = (object: object, seen: Set<object>): string => {
  if (Array.isArray(object)) return `[${object.map((item) => canonical(item, seen)).join(",")}]`
  if (object instanceof Date) return JSON.stringify(object.toISOString())
  if (object instanceof Map) return canonical(Object.fromEntries(object), seen)
  if (object instanceof Set) return canonical([...object].map((item) => canonical(item, seen)).sort(), seen)
  const keys = Object.keys(object).sort()
  const fields: Array<string> = []
  for (const key of keys) {
    const field = (object as Record<string, unknown>)[key]
    if (field !== undefined && typeof field !== "function")
      fields.push(`${JSON.stringify(key)}:${canonical(field, seen)}`)
  }
  return `{${fields.join(",")}}`
}

export const canonicalJson = (value: unknown): string => canonical(value, new Set())

const FNV_PRIME = 0x100000001b3n
const FNV_OFFSET = 0xcbf29ce484222325n
const MASK = 0xffffffffffffffffn

export const fnv1a64 = (text: string): string => {
  let hash = FNV_OFFSET
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    hash = ((hash ^ BigInt(code & 0xff)) * FNV_PRIME) & MASK
    hash = ((hash ^ BigInt(code >>> 8)) * FNV_PRIME) & MASK
  }
  return hash.toString(16).padStart(16, "0")
}

export const hashValue = (value: unknown): string | undefined => {
  try {
    return fnv1a64(canonicalJson(value))
  } catch {
    return undefined
  }
}
