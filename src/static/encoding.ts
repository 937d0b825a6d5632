// Accept-Encoding for precompressed files: which of the variants on disk (file.br, file.gz) the
// client takes, best first. roomgate never compresses on the fly; it only picks a file.

export type Coding = 'br' | 'gzip';

export interface Variant {
  readonly coding: Coding;
  /** File name suffix of the variant next to the file. */
  readonly suffix: string;
  /** Appended to the ETag so each variant has its own validator. */
  readonly tag: string;
}

const BR: Variant = { coding: 'br', suffix: '.br', tag: 'br' };
const GZIP: Variant = { coding: 'gzip', suffix: '.gz', tag: 'gz' };
const NONE: readonly Variant[] = [];
const BR_GZIP: readonly Variant[] = [BR, GZIP];
const GZIP_BR: readonly Variant[] = [GZIP, BR];
const BR_ONLY: readonly Variant[] = [BR];
const GZIP_ONLY: readonly Variant[] = [GZIP];

/**
 * The variants to try, in order: the accepted codings by q-value, brotli before gzip at equal q
 * (smaller). A coding is accepted when listed with q > 0, or covered by "*" with q > 0 and not
 * listed; "x-gzip" counts as gzip.
 */
export function acceptedVariants(header: string | undefined): readonly Variant[] {
  if (header === undefined || header === '' || header.length > 1024) return NONE;
  let br: number | null = null;
  let gzip: number | null = null;
  let star: number | null = null;
  for (const part of header.split(',')) {
    const [nameRaw = '', ...params] = part.split(';');
    const name = nameRaw.trim().toLowerCase();
    if (name !== 'br' && name !== 'gzip' && name !== 'x-gzip' && name !== '*') continue;
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(p);
      if (m) q = Math.min(1, Number(m[1]));
    }
    if (name === 'br') br = q;
    else if (name === '*') star = q;
    else gzip = Math.max(gzip ?? 0, q);
  }
  const qBr = br ?? star ?? 0;
  const qGzip = gzip ?? star ?? 0;
  if (qBr > 0 && qGzip > 0) return qGzip > qBr ? GZIP_BR : BR_GZIP;
  if (qBr > 0) return BR_ONLY;
  if (qGzip > 0) return GZIP_ONLY;
  return NONE;
}
