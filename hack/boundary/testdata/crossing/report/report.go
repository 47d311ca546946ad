package report

const File = "report.json"
