# Judges one reproducer run: the consumer's JSON (flattened by json_flatten.awk) against the
# tables graph_repro printed. POSIX awk (mawk, gawk).
#
#   awk -F'\t' -v flat=consumer.flat -v known="capture conditional" [-v tsv=result.tsv] \
#       -f repro_check.awk table1.tsv [table2.tsv ...]
#
# Per phase: every kernel the program ran reached the consumer matched
# (kernels_by_name[k].matched == kernels_run). Orphans are attributed to the phases that can
# explain them: orphan eager correlations to "capture" phases (launches recorded during capture
# announce IDs that never run, docs/cupti-facts.md, fact 5), orphan graph correlations to
# "conditional" (body kernels come with ID 0, fact 7) and "hostonly" phases (no kernel at all, fact 8), orphan
# kernels to "conditional" phases. The program makes each phase's share distinct (subset sums
# differ), so a count that equals the sum of exactly one set of phases is attributed exactly;
# otherwise known failures absorb first and the note says "ambiguous". What no phase explains is a
# global failure. Globally: driver graph launches (cuGraphLaunch = -514, cuGraphLaunch_ptsz =
# -515) must be announced at least once per call, no ring-buffer drops, no read errors.
#
# Status per phase: PASS, FAIL, KNOWN-FAIL (listed in `known` by phase name or class). A known
# failure that passes is reported as such. Exit 0 if no phase outside `known` fails and every
# global check passes, 1 otherwise.

BEGIN {
  if (flat == "") { print "repro_check: -v flat=FILE missing" > "/dev/stderr"; aborted = 2; exit 2 }
  while ((rc = (getline line < flat)) > 0) {
    t = index(line, "\t")
    if (t == 0) continue
    J[substr(line, 1, t - 1)] = substr(line, t + 1)
  }
  if (rc < 0) { print "repro_check: cannot read " flat > "/dev/stderr"; aborted = 2; exit 2 }
  close(flat)
  nk = split(known, KT, /[ ,]+/)
  for (i = 1; i <= nk; i++) if (KT[i] != "") KNOWN[KT[i]] = 1
  nrows = 0; nph = 0; ntables = 0; tables_ok = 0
}

FNR == 1 { ntables++ }
/^# end status=ok/ { tables_ok++ }
/^#/ { next }
$1 == "phase" && $2 == "class" { next }
NF >= 7 {
  nrows++
  R_phase[nrows] = $1; R_class[nrows] = $2; R_kernel[nrows] = $3
  R_run[nrows] = $4 + 0; R_launches[nrows] = $5 + 0; R_api[nrows] = $6; R_cbids[nrows] = $7
  if (!($1 in P_idx)) {
    nph++; P_idx[$1] = nph; P_name[nph] = $1; P_class[nph] = $2; P_launches[nph] = $5 + 0
    P_cbids[nph] = $7; P_api[nph] = $6
  }
  P_kruns[$1] += $4
}

function num(key) { return (key in J) ? J[key] + 0 : 0 }
function has(key) { return key in J }
function is_known(p) { return (p in KNOWN) || (P_class[P_idx[p]] in KNOWN) }
function add_reason(p, r) { REASON[p] = (REASON[p] == "" ? r : REASON[p] "; " r) }
function add_note(p, r) { NOTE[p] = (NOTE[p] == "" ? r : NOTE[p] "; " r) }

# Orphans of one type: explainers EX_p[type, i] with capacity EX_c[type, i].
function add_explainer(type, p, cap) {
  if (cap <= 0) return
  NE[type]++
  EX_p[type, NE[type]] = p
  EX_c[type, NE[type]] = cap
}

function attribute(type, observed, label,   ne, m, x, i, s, nmatch, best, rem, take, pass, p) {
  ne = NE[type] + 0
  UNEXPLAINED[type] = 0
  AMBIG[type] = 0
  if (observed <= 0) return
  nmatch = 0
  if (ne <= 12) {
    for (m = 1; m < 2 ^ ne; m++) {
      x = m; s = 0
      for (i = 1; i <= ne; i++) { if (x % 2) s += EX_c[type, i]; x = int(x / 2) }
      if (s == observed) { nmatch++; best = m }
    }
  }
  if (nmatch == 1) {
    x = best
    for (i = 1; i <= ne; i++) {
      if (x % 2) {
        p = EX_p[type, i]
        add_reason(p, EX_c[type, i] " " label)
      }
      x = int(x / 2)
    }
    return
  }
  # No exact or several exact decompositions: known failures absorb first, then the others.
  rem = observed
  if (ne > 0 && rem > 0) AMBIG[type] = 1
  for (pass = 1; pass <= 2; pass++) {
    for (i = 1; i <= ne && rem > 0; i++) {
      p = EX_p[type, i]
      if ((pass == 1) != (is_known(p) ? 1 : 0)) continue
      take = EX_c[type, i] < rem ? EX_c[type, i] : rem
      rem -= take
      add_reason(p, take " " label " (ambiguous attribution)")
    }
  }
  UNEXPLAINED[type] = rem
}

function gline(status, text) {
  printf "  [%s] %s\n", status, text
  if (status == "FAIL") { gfail++; GFAIL = GFAIL (GFAIL == "" ? "" : "; ") text }
}

END {
  if (aborted) exit aborted
  if (nrows == 0) {
    print "repro_check: no phase rows in the program tables" > "/dev/stderr"
    exit 2
  }
  if (!has("correlations")) {
    print "repro_check: the consumer JSON has no \"correlations\" key" > "/dev/stderr"
    exit 2
  }
  gfail = 0; GFAIL = ""

  # Per-row kernel checks.
  for (r = 1; r <= nrows; r++) {
    k = R_kernel[r]; p = R_phase[r]
    if (k == "-") { R_rec[r] = "-"; R_mat[r] = "-"; continue }
    R_rec[r] = num("kernels_by_name/" k "/records")
    R_mat[r] = num("kernels_by_name/" k "/matched")
    SEEN_KERNEL[k] = 1
    if (R_mat[r] != R_run[r]) {
      ROWFAIL[p] = 1
      if (R_mat[r] > R_run[r])
        ROWREASON[r] = "matched " R_mat[r] " > " R_run[r] " run"
      else
        ROWREASON[r] = (R_run[r] - R_mat[r]) " of " R_run[r] " kernels unmatched" \
                       (R_rec[r] < R_run[r] ? " (" R_rec[r] " records reached the consumer)" : "")
    }
  }

  # Orphans.
  for (i = 1; i <= nph; i++) {
    p = P_name[i]; c = P_class[i]
    if (c == "capture") add_explainer("eager", p, P_launches[i])
    if (c == "conditional") { add_explainer("graph", p, P_launches[i]); add_explainer("kernel", p, P_kruns[p]) }
    if (c == "hostonly") add_explainer("graph", p, P_launches[i])
  }
  o_e = num("orphan_correlations_eager"); o_g = num("orphan_correlations_graph"); o_k = num("orphan_kernels")
  attribute("eager", o_e, "orphan eager correlations")
  attribute("graph", o_g, "orphan graph correlations")
  attribute("kernel", o_k, "orphan kernels")

  # Phase status.
  nfail = 0; nknownfail = 0; nknownpass = 0
  for (i = 1; i <= nph; i++) {
    p = P_name[i]
    if (REASON[p] == "" && !ROWFAIL[p]) {
      STATUS[p] = "PASS"
      if (is_known(p)) { add_note(p, "known failure passes now: drop it from KNOWN_FAILURES"); nknownpass++; KPASS = KPASS " " p }
    } else if (is_known(p)) {
      STATUS[p] = "KNOWN-FAIL"; nknownfail++; KFAIL = KFAIL " " p
    } else {
      STATUS[p] = "FAIL"; nfail++; PFAIL = PFAIL " " p
    }
  }

  if (tsv != "") printf "phase\tclass\tkernel\tkernels_run\trecords\tmatched\tstatus\tapi\tcbids\tnote\n" > tsv
  printf "%-28s %-11s %-36s %5s %7s %7s  %-10s %s\n", "phase", "class", "kernel", "run", "records", "matched", "status", "note"
  printf "%-28s %-11s %-36s %5s %7s %7s  %-10s %s\n", "-----", "-----", "------", "---", "-------", "-------", "------", "----"
  for (r = 1; r <= nrows; r++) {
    p = R_phase[r]
    first = (r == 1 || R_phase[r - 1] != p)
    note = ROWREASON[r]
    if (first) {
      if (REASON[p] != "") note = (note == "" ? REASON[p] : note "; " REASON[p])
      if (NOTE[p] != "") note = (note == "" ? NOTE[p] : note "; " NOTE[p])
    }
    line = sprintf("%-28s %-11s %-36s %5d %7s %7s  %-10s %s", p, R_class[r], R_kernel[r], R_run[r], R_rec[r], R_mat[r], STATUS[p], note)
    sub(/ +$/, "", line)
    print line
    if (tsv != "")
      printf "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p, R_class[r], R_kernel[r], R_run[r], R_rec[r], R_mat[r], STATUS[p], R_api[r], R_cbids[r], note > tsv
  }

  print ""
  print "consumer totals:"
  printf "  correlations %d, kernel records %d (graph %d), matched %d (graph %d), graph launches with kernels %d\n", \
    num("correlations"), num("kernel_records"), num("graph_kernel_records"), num("kernels_matched"), \
    num("graph_kernels_matched"), num("graph_launches_with_kernels")
  printf "  orphan kernels %d, orphan correlations eager %d / graph %d; events %d in %s s\n", \
    o_k, o_e, o_g, num("events"), (has("duration_s") ? J["duration_s"] : "?")
  cb = ""
  for (key in J) if (index(key, "correlations_by_cbid/") == 1) cb = cb " " substr(key, 22) "=" J[key]
  print "  correlations_by_cbid:" (cb == "" ? " (none)" : cb)
  pl = ""
  for (key in J) if (index(key, "pids/") == 1) pl = pl " " J[key]
  print "  pids:" (pl == "" ? " (none)" : pl)
  extra = ""
  for (key in J) {
    if (index(key, "kernels_by_name/") != 1) continue
    rest = substr(key, 17)
    sl = index(rest, "/")
    if (sl == 0) continue
    k = substr(rest, 1, sl - 1)
    if ((k in SEEN_KERNEL) || (k in EXTRA_DONE)) continue
    EXTRA_DONE[k] = 1
    extra = extra " " k "(records " num("kernels_by_name/" k "/records") ", matched " num("kernels_by_name/" k "/matched") ")"
  }
  if (extra != "") print "  kernels the program does not know:" extra

  print ""
  print "global checks:"
  need514 = 0; need515 = 0
  for (i = 1; i <= nph; i++) {
    if (P_cbids[i] == "drv514") need514 += P_launches[i]
    if (P_cbids[i] == "drv515") need515 += P_launches[i]
  }
  got514 = num("correlations_by_cbid/-514"); got515 = num("correlations_by_cbid/-515")
  if (need514 > 0)
    gline(got514 >= need514 ? "PASS" : "FAIL", "-514 (cuGraphLaunch) correlation events: " got514 ", expected >= " need514)
  if (need515 > 0)
    gline(got515 >= need515 ? "PASS" : "FAIL", "-515 (cuGraphLaunch_ptsz) correlation events: " got515 ", expected >= " need515)
  split("eager graph kernel", TY, " ")
  LBL["eager"] = "orphan eager correlations"; LBL["graph"] = "orphan graph correlations"; LBL["kernel"] = "orphan kernels"
  OBS["eager"] = o_e; OBS["graph"] = o_g; OBS["kernel"] = o_k
  for (t = 1; t <= 3; t++) {
    ty = TY[t]
    if (UNEXPLAINED[ty] > 0)
      gline("FAIL", LBL[ty] ": " OBS[ty] ", of which " UNEXPLAINED[ty] " no phase explains")
    else if (OBS[ty] > 0)
      gline("PASS", LBL[ty] ": " OBS[ty] ", all attributed to phases above" (AMBIG[ty] ? " (ambiguous split)" : ""))
    else
      gline("PASS", LBL[ty] ": 0")
  }
  gline(num("ringbuf_drops") == 0 ? "PASS" : "FAIL", "ring buffer drops: " num("ringbuf_drops"))
  gline(num("read_errors") == 0 ? "PASS" : "FAIL", "read errors: " num("read_errors"))
  if (num("errors") > 0) gline("WARN", "error probe firings: " num("errors") " (see the library log)")
  if (num("correlations") == 0) gline("FAIL", "no correlation events at all: was the library injected and the consumer attached?")
  gline(tables_ok == ntables ? "PASS" : "FAIL", "program tables complete and self-consistent: " tables_ok " of " ntables)

  print ""
  if (nknownfail > 0) print "known failures (KNOWN_FAILURES=\"" known "\"):" KFAIL
  if (nknownpass > 0) print "known failures that pass now:" KPASS
  if (nfail > 0 || gfail > 0) {
    printf "verdict: RED:"
    if (nfail > 0) printf " failing phases:%s;", PFAIL
    if (gfail > 0) printf " global: %s", GFAIL
    printf "\n"
    exit 1
  }
  printf "verdict: GREEN (%d phases pass, %d known failures)\n", nph - nknownfail, nknownfail
  exit 0
}
