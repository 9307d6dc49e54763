# Shared by the sweep scripts under train/ (source it after setting FLAGS and R):
#   run NAME [flags...]        train runs/NAME with $FLAGS and the flags; skipped once its model is
#                              saved, resumed from its checkpoint otherwise
#   score NAME SPLIT DOMAIN    P@1 of runs/NAME/model on corpus-g's SPLIT and DOMAIN (fp32, 2,000 queries
#                              per direction) into $R/NAME-SPLIT-DOMAIN.json; skipped once written
run() {
  local name=$1; shift
  [ -s "runs/$name/model/manifest.json" ] && return 0
  edge-xsent train $FLAGS --out "runs/$name" --quiet "$@" > /dev/null
}
score() {
  local f=$R/$1-$2-$3.json
  [ -s "$f" ] && return 0
  edge-xsent eval xsr --model "runs/$1/model" --data corpus-g --split "$2" --domain "$3" --backend torch --json > "$f.tmp" 2>/dev/null
  mv "$f.tmp" "$f"  # a stopped evaluation leaves no half-written result
}
