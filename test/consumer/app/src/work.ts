/** Run in a worker thread by the `Blocking` agent of `main.ts`. */
export const double = (input: number): number => input * 2
