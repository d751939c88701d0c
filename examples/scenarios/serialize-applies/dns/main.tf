variable "owner" {
  type = string
}

resource "terraform_data" "record" {
  input = "${var.owner}.internal.example.com"
}
