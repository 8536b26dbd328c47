// Public surface of src/store: crash-safe files and the record store built on them.
export { atomicWriteFile, removeFile, fsyncDir, TMP_SUFFIX } from './atomic.js';
export { encodeId, decodeId, fileNameOf, idOfFileName, RECORD_SUFFIX } from './file-names.js';
export { RecordStore, type RecordSchema, type StoreProblem, type OpenOptions } from './record-store.js';
