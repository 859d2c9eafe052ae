// A line chart on a canvas: the last `points` values of each series, scaled to the largest.
export class LineChart {
  constructor(canvas, series, points = 60) {
    this.canvas = canvas;
    this.series = series.map((s) => ({ ...s, values: [] }));
    this.points = points;
  }

  push(...values) {
    values.forEach((value, i) => {
      const series = this.series[i].values;
      series.push(Number.isFinite(value) ? value : 0);
      if (series.length > this.points) series.shift();
    });
    this.draw();
  }

  draw() {
    const { canvas } = this;
    const width = (canvas.width = canvas.clientWidth * devicePixelRatio);
    const height = (canvas.height = canvas.clientHeight * devicePixelRatio);
    const g = canvas.getContext("2d");
    g.clearRect(0, 0, width, height);
    const top = Math.max(1, ...this.series.flatMap((s) => s.values));
    g.fillStyle = "#667085";
    g.font = `${11 * devicePixelRatio}px system-ui`;
    g.fillText(top.toFixed(top < 10 ? 1 : 0), 4, 12 * devicePixelRatio);
    for (const { values, color } of this.series) {
      g.strokeStyle = color;
      g.lineWidth = 2 * devicePixelRatio;
      g.beginPath();
      values.forEach((value, i) => {
        const x = (i / (this.points - 1)) * width;
        const y = height - (value / top) * (height - 16 * devicePixelRatio);
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
      });
      g.stroke();
    }
  }

  legend(h) {
    return h("div", { class: "legend" },
      this.series.map((s) => h("span", { style: `color:${s.color}` }, `— ${s.label}`)));
  }
}
