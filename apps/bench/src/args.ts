export interface Args {
  readonly scenarios: ReadonlyArray<string>
  readonly quick: boolean
  readonly reps: number | undefined
  readonly help: boolean
}

const positiveInt = (raw: string | undefined): number => {
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 1) throw new Error(`--reps needs a positive integer, got ${raw}`)
  return value
}

export const parseArgs = (argv: ReadonlyArray<string>): Args => {
  const scenarios: Array<string> = []
  let quick = false
  let reps: number | undefined
  let help = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--") continue
    else if (arg === "--quick") quick = true
    else if (arg === "--help" || arg === "-h") help = true
    else if (arg === "--reps") reps = positiveInt(argv[++i])
    else if (arg.startsWith("--reps=")) reps = positiveInt(arg.slice("--reps=".length))
    else if (arg.startsWith("-")) throw new Error(`unknown option ${arg}`)
    else scenarios.push(arg)
  }
  return { scenarios, quick, reps, help }
}
