// The package's API for code that imports this file by path (the repository's tests, demos and
// page, a CDN): node.js in Node, browser.js elsewhere. Through the package name, package.json's
// conditions pick the entry directly; bundlers never see this file.
const isNode = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;

const entry = isNode ? await import('./node.js') : await import('./browser.js');

export const { init, initNative, initSync, initWorker, simdSupported, DEFAULTS, Msda, MsdaWorker, Prepared, WorkerPrepared } = entry;
