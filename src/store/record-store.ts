// A directory of JSON documents keyed by id, all held in memory, each write atomic and
// fsync'd before put() resolves.
//
// Where stores live: sandbox records go under the run dir (/run/knit, a tmpfs) because the
// kernel state they describe (netns, veths, taps) does not survive a reboot either; a record
// that outlived its objects would only send recovery after ghosts. Registrations that must
// outlive a reboot (extensions) go under the state dir (/var/lib/knit).

import { mkdir, readdir, readFile, unlink } from 'node:fs/promises';
import path from 'node:path';
import { KnitError } from '../base/errors.js';
import { atomicWriteFile, replaceInMemoryFile, fsyncDir, onTmpfs, removeFile, removeInMemoryFile, TMP_SUFFIX } from './atomic.js';
import { fileNameOf, idOfFileName } from './file-names.js';

/** Any validator with zod's safeParse shape (a zod schema is one). */
export interface RecordSchema<T> {
  safeParse(data: unknown):
    | { success: true; data: T }
    | { success: false; error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } };
}

/** A document serialized for its write. */
interface Serialized<T> {
  id: string;
  file: string;
  text: string;
  stored: Stored<T>;
  summary?: string;
}

/** A record as the store holds it: the document (stores with a schema), or the text that was
 * written, parsed at each read and never kept parsed. The text is a third smaller than the
 * objects it parses into and is kept in one byte per character (see oneByte), so a node with
 * 1,000 sandboxes holds ~3 MiB of records; a read costs a JSON.parse of ~3 KB (~10 µs). Most
 * records are replaced before anyone reads them (an attach's journal entry). */
interface Stored<T> {
  doc?: T;
  text?: string;
}

/** A write serialized by prepare(), done by commit() (once). */
export interface PreparedPut {
  commit(): Promise<void>;
}

/** A file open() skipped (or, for temporary files, removed), and why. */
export interface StoreProblem {
  file: string;
  reason: string;
}

export interface OpenOptions {
  /** Called for each skipped file as it is found (for the log); they are also in .problems. */
  onProblem?(problem: StoreProblem): void;
  /** The newest record format this code reads (the documents' numeric `version` field). A
   * record of a newer format was written by a newer knit: open() refuses the whole store
   * rather than skip it (a skipped record's devices would look like leftovers to be swept)
   * or read it in part. */
  formatVersion?: number;
  /** A short tag per record (a sandbox's state) kept beside its text, so tally() counts records
   * by it without parsing them all (a readiness probe every few seconds would). */
  summarize?(doc: unknown): string;
}

/** Files read at once during open(): enough to overlap I/O, few enough to stay far from EMFILE. */
const LOAD_CONCURRENCY = 32;

/** Throws when any record's format `version` is newer than `readable`. */
function refuseNewerRecords(dir: string, docs: Iterable<[string, unknown]>, readable: number): void {
  const newer: string[] = [];
  let newest = readable;
  for (const [id, doc] of docs) {
    const version = (doc as { version?: unknown } | null)?.version;
    if (typeof version === 'number' && version > readable) {
      newer.push(id);
      newest = Math.max(newest, version);
    }
  }
  if (!newer.length) return;
  const some = newer.slice(0, 3).map((id) => JSON.stringify(id)).join(', ') + (newer.length > 3 ? `, and ${newer.length - 3} more` : '');
  throw new KnitError(
    'FAILED_PRECONDITION',
    `${dir} holds ${newer.length} record(s) in format version ${newest}, written by a newer knit; ` +
      `this knit reads format version ${readable} at most and will not start over them (${some}). ` +
      'Run the newer knit again (or detach its sandboxes with it) before downgrading.',
  );
}

/** JSON text with every character above U+00FF written as a \\u escape (the same JSON). V8
 * keeps a string with any such character (a step's "↔") in two bytes per character, a record
 * of plain text in one: half the memory for the records a daemon holds. */
function oneByte(json: string): string {
  if (!/[^\x00-\xff]/.test(json)) return json;
  const escaped = json.replace(/[^\x00-\xff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  // replace() answers a two-byte string for a two-byte subject, whatever it holds: copy it.
  return Buffer.from(escaped, 'latin1').toString('latin1');
}

export class RecordStore<T> {
  private readonly docs = new Map<string, Stored<T>>();
  /** summarize()'s tag per id, when the store has one. */
  private readonly summaries = new Map<string, string>();
  private summarize?: (doc: unknown) => string;
  /** Per-id tail of pending writes: each write starts after the previous one for that id. */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly found: StoreProblem[] = [];
  /** On tmpfs the writes are cheaper done synchronously (see onTmpfs). */
  private inMemory = false;

  /** dir with one trailing slash: a record's file is this plus its name (an encoded id has no
   * '/' and is never "." or ".."), without a path.join per write. */
  private readonly filePrefix: string;

  private constructor(
    readonly dir: string,
    private readonly schema: RecordSchema<T> | undefined,
  ) {
    this.filePrefix = path.join(dir, '/');
  }

  private fileOf(id: string): string {
    return this.filePrefix + fileNameOf(id);
  }

  /** Load every record in dir (created if missing). Unreadable, corrupt or invalid files are
   * skipped and reported, not fatal: one bad file must not keep the daemon down. Leftover
   * temporary files are the remains of a write a crash interrupted (the record still has its
   * previous content) and are removed. */
  static async open<T>(dir: string, schema?: RecordSchema<T>, options: OpenOptions = {}): Promise<RecordStore<T>> {
    const store = new RecordStore<T>(dir, schema);
    store.summarize = options.summarize;
    const report = (file: string, reason: string) => {
      const problem = { file: path.join(dir, file), reason };
      store.found.push(problem);
      options.onProblem?.(problem);
    };
    await mkdir(dir, { recursive: true, mode: 0o700 });
    store.inMemory = onTmpfs(dir);
    const entries = await readdir(dir, { withFileTypes: true });
    let removedTmp = false;
    const load = async (entry: (typeof entries)[number]) => {
      if (entry.name.endsWith(TMP_SUFFIX)) {
        await unlink(path.join(dir, entry.name));
        removedTmp = true;
        report(entry.name, 'removed: temporary file left by an interrupted write');
        return;
      }
      const id = idOfFileName(entry.name);
      if (id === undefined) return report(entry.name, 'skipped: not a record file name');
      if (!entry.isFile()) return report(entry.name, 'skipped: not a regular file');
      const text = await readFile(path.join(dir, entry.name), 'utf8');
      const result = store.decode(text);
      if ('error' in result) return report(entry.name, `skipped: ${result.error}`);
      store.docs.set(id, schema ? { doc: result.doc } : { text: oneByte(text) });
      if (store.summarize) store.summaries.set(id, store.summarize(result.doc));
    };
    for (let i = 0; i < entries.length; i += LOAD_CONCURRENCY) {
      await Promise.all(entries.slice(i, i + LOAD_CONCURRENCY).map(load));
    }
    if (removedTmp) await fsyncDir(dir);
    if (options.formatVersion !== undefined) refuseNewerRecords(dir, store.entries(), options.formatVersion);
    return store;
  }

  /** What open() skipped or removed. */
  get problems(): readonly StoreProblem[] {
    return this.found;
  }

  get size(): number {
    return this.docs.size;
  }

  /** The last written document, exactly what open() would read back: a fresh parse for a
   * store without a schema. Treat it as read-only: change a copy and put() that. */
  get(id: string): T | undefined {
    const stored = this.docs.get(id);
    return stored && this.docOf(stored);
  }

  has(id: string): boolean {
    return this.docs.has(id);
  }

  *values(): IterableIterator<T> {
    for (const stored of this.docs.values()) yield this.docOf(stored);
  }

  *entries(): IterableIterator<[string, T]> {
    for (const [id, stored] of this.docs) yield [id, this.docOf(stored)];
  }

  private docOf(stored: Stored<T>): T {
    return stored.text !== undefined ? (JSON.parse(stored.text) as T) : (stored.doc as T);
  }

  /** How many records carry each summarize() tag (empty without summarize). */
  tally(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const tag of this.summaries.values()) counts.set(tag, (counts.get(tag) ?? 0) + 1);
    return counts;
  }

  ids(): IterableIterator<string> {
    return this.docs.keys();
  }

  /** Write doc durably, then make it what get() returns. The doc is serialized now, so later
   * changes to the object do not leak in; writes for one id land in call order. */
  put(id: string, doc: T): Promise<void> {
    let serialized;
    try {
      serialized = this.serialize(id, doc);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.write(serialized);
  }

  /** put()'s serialization now, its write when commit() is called: for a caller with time to
   * spare first (an attach while the kernel works). What lands is doc as it is now. */
  prepare(id: string, doc: T): PreparedPut {
    const serialized = this.serialize(id, doc);
    let committed = false;
    return {
      commit: () => {
        if (committed) return Promise.reject(new KnitError('INTERNAL', `prepared write of record ${JSON.stringify(id)} committed twice`));
        committed = true;
        return this.write(serialized);
      },
    };
  }

  private write({ id, file, text, stored, summary }: Serialized<T>): Promise<void> {
    return this.enqueue(id, async () => {
      if (this.inMemory) replaceInMemoryFile(file, text);
      else await atomicWriteFile(file, text);
      this.docs.set(id, stored);
      if (summary !== undefined) this.summaries.set(id, summary);
    });
  }

  /** One line of JSON (V8 writes it several times faster than an indented one), and what get()
   * will answer: exactly what open() reads back after a restart. With a schema the text is
   * read back now, so a document the schema would refuse is never written; without one, JSON
   * that JSON.stringify wrote always reads back, and get() parses it when first asked. */
  private serialize(id: string, doc: T): Serialized<T> {
    const file = this.fileOf(id);
    const json = JSON.stringify(doc) as string | undefined;
    if (json === undefined) throw new KnitError('INTERNAL', `record ${JSON.stringify(id)} would not load back: it has no JSON form`);
    const text = oneByte(`${json}\n`);
    const summary = this.summarize?.(doc);
    if (!this.schema) return { id, file, text, stored: { text }, summary };
    const result = this.decode(text);
    if ('error' in result) throw new KnitError('INTERNAL', `record ${JSON.stringify(id)} would not load back: ${result.error}`);
    return { id, file, text, stored: { doc: result.doc }, summary };
  }

  /** Delete the record durably. Removing an absent id is not an error. */
  remove(id: string): Promise<void> {
    let file: string;
    try {
      file = this.fileOf(id);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.enqueue(id, async () => {
      if (this.inMemory) removeInMemoryFile(file);
      else await removeFile(file);
      this.docs.delete(id);
      this.summaries.delete(id);
    });
  }

  /** Resolves when every write issued so far has finished (e.g. before shutdown). */
  async settled(): Promise<void> {
    await Promise.all(this.chains.values());
  }

  private enqueue(id: string, job: () => Promise<void>): Promise<void> {
    const run = (this.chains.get(id) ?? Promise.resolve()).then(job);
    // The chain continues past a failed write; the caller still gets the failure from `run`.
    const tail = run.catch(() => {});
    this.chains.set(id, tail);
    void tail.then(() => {
      if (this.chains.get(id) === tail) this.chains.delete(id);
    });
    return run;
  }

  private decode(text: string): { doc: T } | { error: string } {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      return { error: `not valid JSON (${(err as Error).message})` };
    }
    if (!this.schema) return { doc: value as T };
    const result = this.schema.safeParse(value);
    if (result.success) return { doc: result.data };
    const issues = result.error.issues.map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`);
    return { error: `does not match the record schema (${issues.join('; ')})` };
  }
}
