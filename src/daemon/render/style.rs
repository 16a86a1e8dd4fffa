//! The style sheet the daemon's pages share (the status page, the
//! capture pages), inlined into each so that a page loads nothing.

pub const STYLE: &str = "\
body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}\
h1{font-size:1.4em;margin:0 0 .2em}\
.sub{color:#555;margin:0 0 1em}\
.ok{color:#17692b;font-weight:bold}.bad{color:#b00020;font-weight:bold}\
.warn{color:#8a5a00;font-weight:bold}\
table{border-collapse:collapse;margin:1em 0}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}\
th{background:#f0f0f0}td.l,th.l{text-align:left}\
tr.problem td{background:#fde8ea}\
.plot svg{max-width:100%;height:auto;border:1px solid #ddd}\
footer{color:#666;font-size:.85em;margin-top:1em}";
