package api

const Kind = "ModelDeployment"
