// Debian's Chromium and the flags every launch gives it (no background traffic: this machine's
// network is closed, and Chromium's own connections would be refused many at a time).
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];
