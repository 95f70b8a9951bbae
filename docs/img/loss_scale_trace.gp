# loss_scale_trace.gp: draws docs/img/loss_scale_trace.png from loss_scale_trace.dat, the output of
#   build/examples/amp_overflow_fp16 docs/img/loss_scale_trace.dat
# Run from the repository root:  gnuplot docs/img/loss_scale_trace.gp
set terminal pngcairo size 900,420 font "sans,10"
set output "docs/img/loss_scale_trace.png"
set title "GradScaler on f16 autocast: init 2^{24}, growth x2 every 10 clean steps, backoff x0.5 on inf"
set xlabel "step"
set ylabel "loss scale (log_2)"
set y2label "loss"
set logscale y2
set ytics nomirror
set y2tics
set key at graph 0.78, graph 0.25 box opaque
set grid ytics
plot "docs/img/loss_scale_trace.dat" using 1:(log($2)/log(2)) with steps lw 2 lc rgb "#1f77b4" title "log_2 scale", \
     "" using 1:($3 == 1 ? log($2)/log(2) : 1/0) with points pt 7 ps 0.8 lc rgb "#d62728" title "skipped step (inf/NaN)", \
     "" using 1:4 axes x1y2 with lines lw 1 lc rgb "#7f7f7f" title "loss"
